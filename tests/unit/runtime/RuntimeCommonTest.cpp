// Tests of the backend-neutral runtime: Philox, plan-invariant init, data
// order, graph, JSON.
#include "backends/common/Data.h"
#include "backends/common/Init.h"
#include "backends/common/Metrics.h"
#include "backends/common/MiniJson.h"
#include "backends/common/Parallel.h"
#include "backends/common/Philox.h"
#include "backends/common/Trace.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sched.h>
#include <thread>
#include <unistd.h>

using namespace autoddl::rt;

TEST(Philox, KnownAnswerVectors) {
  // Random123's kat_vectors for philox4x32 with 10 rounds (Salmon et al. SC'11
  // reference code).
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (PhiloxCounter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32_10({~0u, ~0u, ~0u, ~0u}, {~0u, ~0u}),
            (PhiloxCounter{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
                          {0xa4093822, 0x299f31d0}),
            (PhiloxCounter{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Init, NormalHasRequestedMoments) {
  const Shape full = {256, 256};
  std::vector<float> w(65536);
  init_normal(w.data(), Slice::whole(full), 42, "h.0.mlp.fc.weight", 0.5f,
              0.02f);
  double s = 0, ss = 0;
  for (float v : w) {
    s += v;
    ss += double(v) * v;
  }
  const double mean = s / w.size(), var = ss / w.size() - mean * mean;
  // 65536 draws: the standard error of the mean is 0.02/256 ~ 8e-5, of the std
  // ~ 0.02/362; bounds of ~6 standard errors.
  EXPECT_NEAR(mean, 0.5, 5e-4);
  EXPECT_NEAR(std::sqrt(var), 0.02, 4e-4);
}

TEST(Init, ShardEqualsSliceOfFullTensor) {
  // Plan invariance (DESIGN §6): under nd-SBP (S(1), S(0)) on a 2x4 mesh, and
  // S(2) on 3 ranks, each rank's shard is exactly the matching block of the
  // whole tensor.
  const Shape full = {8, 6, 9};
  std::vector<float> whole(numel(full));
  init_normal(whole.data(), Slice::whole(full), 7, "wte", 0.0f, 1.0f);
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 4; ++b) {
      const Slice s = Slice::whole(full).split(1, 2, a).split(0, 4, b);
      std::vector<float> shard(s.numel());
      init_normal(shard.data(), s, 7, "wte", 0.0f, 1.0f);
      for (int64_t i = 0; i < s.local[0]; ++i)
        for (int64_t j = 0; j < s.local[1]; ++j)
          for (int64_t k = 0; k < s.local[2]; ++k)
            ASSERT_EQ(shard[(i * s.local[1] + j) * s.local[2] + k],
                      whole[((i + b * 2) * 6 + j + a * 3) * 9 + k]);
    }
  const Slice s = Slice::whole(full).split(2, 3, 2);
  std::vector<float> shard(s.numel());
  init_uniform(shard.data(), s, 7, "x", -1.0f, 1.0f);
  std::vector<float> wholeU(numel(full));
  init_uniform(wholeU.data(), Slice::whole(full), 7, "x", -1.0f, 1.0f);
  for (int64_t i = 0; i < s.numel(); ++i) {
    const int64_t row = i / 3, col = i % 3;
    ASSERT_EQ(shard[i], wholeU[row * 9 + 6 + col]);
    ASSERT_GE(shard[i], -1.0f);
    ASSERT_LT(shard[i], 1.0f);
  }
}

TEST(Init, StreamsDifferByNameAndSeed) {
  EXPECT_NE(init_normal_at(1, "a", 0, 0, 1), init_normal_at(1, "b", 0, 0, 1));
  EXPECT_NE(init_normal_at(1, "a", 0, 0, 1), init_normal_at(2, "a", 0, 0, 1));
  EXPECT_EQ(init_normal_at(1, "a", 5, 0, 1), init_normal_at(1, "a", 5, 0, 1));
}

TEST(Init, UnevenSplitIsRejected) {
  EXPECT_THROW(Slice::whole({5, 4}).split(0, 2, 0), std::invalid_argument);
}

TEST(Init, PaddedSplitTilesTheTensorWithShorterLastParts) {
  // 11 rows over 4 parts: parts of 3 rows at 0, 3, 6, 9, the last holding 2;
  // 5 rows over 4: 2, 2, 1 and an empty part. The parts' values are the
  // whole tensor's rows, and their blocks tile it exactly once.
  for (const int64_t rows : {11, 5, 12}) {
    const Shape full = {rows, 3};
    std::vector<float> whole(numel(full));
    init_normal(whole.data(), Slice::whole(full), 3, "wte", 0.0f, 1.0f);
    const int64_t part = Slice::padded_part(rows, 4);
    int64_t covered = 0;
    for (int64_t r = 0; r < 4; ++r) {
      const Slice s = Slice::whole(full).split_padded(0, 4, r);
      EXPECT_EQ(s.offset[0], std::min(r * part, rows));
      EXPECT_EQ(s.local[0], std::clamp<int64_t>(rows - r * part, 0, part));
      EXPECT_EQ(s.local[1], 3);
      covered += s.local[0];
      std::vector<float> shard(size_t(s.numel()));
      init_normal(shard.data(), s, 3, "wte", 0.0f, 1.0f);
      for (int64_t k = 0; k < s.numel(); ++k)
        ASSERT_EQ(shard[size_t(k)], whole[slice_global_index(s, k)]);
      if (rows % 4 == 0) { // divides: the even split
        const Slice e = Slice::whole(full).split(0, 4, r);
        EXPECT_EQ(e.offset, s.offset);
        EXPECT_EQ(e.local, s.local);
      }
    }
    EXPECT_EQ(covered, rows);
  }
  EXPECT_THROW(Slice::whole({5, 4}).split_padded(2, 2, 0),
               std::invalid_argument);
  EXPECT_THROW(Slice::whole({5, 4}).split_padded(0, 2, 2),
               std::invalid_argument);
}

static std::string tempPath(const std::string &name) {
  return "/tmp/autoddl-runtime-test-" + std::to_string(::getpid()) + "-" + name;
}

TEST(TokenData, StepOffsetsAndWrapExactlyAsSpecified) {
  // 10 tokens 0..9, B = 2, T = 3: step s starts at s*6 mod 10 and reads 7
  // tokens, wrapping.
  std::vector<uint16_t> toks;
  for (int i = 0; i < 10; ++i)
    toks.push_back(uint16_t(i));
  const TokenData d = TokenData::fromTokens(toks);
  int32_t in[6], tg[6];
  d.batch(0, 2, 3, 0, 2, in, tg);
  EXPECT_EQ(std::vector<int32_t>(in, in + 6),
            (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(std::vector<int32_t>(tg, tg + 6),
            (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  // step 1: offset 6 -> chunk 6 7 8 9 0 1 2 (wraps at the end of the file)
  d.batch(1, 2, 3, 0, 2, in, tg);
  EXPECT_EQ(std::vector<int32_t>(in, in + 6),
            (std::vector<int32_t>{6, 7, 8, 9, 0, 1}));
  EXPECT_EQ(std::vector<int32_t>(tg, tg + 6),
            (std::vector<int32_t>{7, 8, 9, 0, 1, 2}));
  // a data-parallel rank holding sample 1 alone reads the same rows as the full
  // batch
  int32_t in1[3], tg1[3];
  d.batch(1, 2, 3, 1, 1, in1, tg1);
  EXPECT_EQ(std::vector<int32_t>(in1, in1 + 3),
            (std::vector<int32_t>{9, 0, 1}));
  EXPECT_EQ(std::vector<int32_t>(tg1, tg1 + 3),
            (std::vector<int32_t>{0, 1, 2}));
  // step 5: offset 30 mod 10 = 0
  d.batch(5, 2, 3, 0, 1, in1, tg1);
  EXPECT_EQ(in1[0], 0);
}

TEST(TokenData, ReadsLittleEndianUint16BinAndRawBytes) {
  const std::string bin = tempPath("tok.bin"), txt = tempPath("tok.txt");
  {
    std::ofstream f(bin, std::ios::binary);
    const unsigned char bytes[] = {0x01, 0x02, 0xff, 0x00, 0x10, 0x27};
    f.write(reinterpret_cast<const char *>(bytes), sizeof bytes);
    std::ofstream t(txt, std::ios::binary);
    t << "hi!";
  }
  const TokenData d = TokenData::open(bin);
  ASSERT_EQ(d.size(), 3);
  EXPECT_EQ(d.at(0), 0x0201); // little-endian: low byte first
  EXPECT_EQ(d.at(1), 255);
  EXPECT_EQ(d.at(2), 10000);
  const TokenData t = TokenData::open(txt);
  ASSERT_EQ(t.size(), 3);
  EXPECT_EQ(t.at(0), 'h');
  EXPECT_EQ(t.at(2), '!');
  // a token id outside the vocabulary, a missing file, an odd byte count: clear
  // errors
  EXPECT_THROW(TokenData::open(bin, 1000), std::runtime_error);
  EXPECT_THROW(TokenData::open(tempPath("missing.bin")), std::runtime_error);
  {
    std::ofstream f(bin, std::ios::binary);
    f << "abc";
  }
  try {
    TokenData::open(bin);
    FAIL() << "odd byte count accepted";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find(bin), std::string::npos);
  }
  std::remove(bin.c_str());
  std::remove(txt.c_str());
}

TEST(SyntheticTokens, KeyedByGlobalSampleAndLearnable) {
  const int64_t B = 4, T = 16, V = 50;
  std::vector<int32_t> in(B * T), tg(B * T), in2(T), tg2(T);
  synthetic_tokens(3, 2, B, T, V, 0, B, in.data(), tg.data());
  synthetic_tokens(3, 2, B, T, V, 2, 1, in2.data(), tg2.data());
  for (int64_t t = 0; t < T; ++t) {
    EXPECT_EQ(in2[t], in[2 * T + t]); // sample 2 alone == row 2 of the batch
    EXPECT_EQ(tg2[t], tg[2 * T + t]);
  }
  int follows = 0;
  for (int64_t i = 0; i < B * T; ++i) {
    ASSERT_GE(in[i], 0);
    ASSERT_LT(in[i], V);
    if (i % T + 1 < T) {
      ASSERT_EQ(tg[i], in[i + 1]); // targets are inputs shifted by one
    }
    follows += tg[i] == (7 * in[i] + 3) % V;
  }
  // The chain rule holds with probability 3/4 + 1/(4V): about 48.6 of 64; far
  // above chance.
  EXPECT_GT(follows, 36);
}

TEST(MiniJson, RoundTripAndErrorsWithLocation) {
  const Json j = json_parse("{\"a\": [1, -2.5, true, null], \"s\": "
                            "\"x\\\"\\u00e9\", \"big\": 9007199254740993}",
                            "t.json");
  ASSERT_EQ(j.kind, Json::Kind::Object);
  EXPECT_EQ(j.find("a")->array[1].number, -2.5);
  EXPECT_EQ(j.find("s")->string, "x\"\xc3\xa9");
  EXPECT_EQ(j.find("big")->integer, 9007199254740993LL); // exact beyond 2^53
  EXPECT_EQ(json_parse(j.dump(), "again").dump(), j.dump());
  EXPECT_EQ(Json::of(0.1).dump(), "0.1"); // shortest round-trip form
  try {
    json_parse("{\"a\": 1,\n  \"b\" 2}", "bad.json");
    FAIL();
  } catch (const std::runtime_error &e) {
    EXPECT_STREQ(e.what(), "bad.json: line 2, column 7: expected ':'");
  }
  EXPECT_THROW(json_parse("[1, 2", "x"), std::runtime_error);
  EXPECT_THROW(json_parse(std::string(1000, '['), "deep"), std::runtime_error);
}

// A generated program keeps the model's config.json compact and saves it in
// the layout the importer wrote (nlohmann's dump(2)): strings kept byte for
// byte, empty containers on one line.
TEST(MiniJson, IndentedRestoresTheImportersLayout) {
  const std::string compact =
      "{\"a\":[1,{\"b\":\"x,\\\"}:[\"}],\"e\":[],\"o\":{},\"n\":1e-05,"
      "\"z\":null}";
  EXPECT_EQ(json_indented(compact), "{\n"
                                    "  \"a\": [\n"
                                    "    1,\n"
                                    "    {\n"
                                    "      \"b\": \"x,\\\"}:[\"\n"
                                    "    }\n"
                                    "  ],\n"
                                    "  \"e\": [],\n"
                                    "  \"o\": {},\n"
                                    "  \"n\": 1e-05,\n"
                                    "  \"z\": null\n"
                                    "}\n");
}

TEST(Metrics, JsonHasLossListAndThroughput) {
  RunMetrics m;
  m.loss = {4.5, 4.25};
  m.step_seconds = {1.0, 0.5};
  m.items_per_step = 1024;
  m.peak_memory_bytes = {100, 200};
  m.collectives["all_reduce"] = {3, 48, 0.25};
  EXPECT_EQ(json_parse(metrics_json(m), "metrics").find("lr"), nullptr);
  EXPECT_EQ(json_parse(metrics_json(m), "metrics").find("grad_norm"), nullptr);
  m.lr = {5e-4, 1e-3}; // written where the run recorded them
  m.grad_norm = {2.5, 0.75};
  const Json j = json_parse(metrics_json(m), "metrics");
  EXPECT_EQ(j.find("loss")->array[1].number, 4.25);
  EXPECT_EQ(j.find("lr")->array[0].number, 5e-4);
  EXPECT_EQ(j.find("grad_norm")->array[1].number, 0.75);
  // mean step time skips the warm-up step: 0.5 s, so 1024 / 0.5 tokens per
  // second
  EXPECT_EQ(j.find("tokens_per_second")->number, 2048);
  EXPECT_EQ(j.find("collectives")->find("all_reduce")->find("calls")->integer,
            3);
  EXPECT_GT(peak_resident_bytes(), 0);
}

TEST(Trace, EventsFormAChromeTraceDocument) {
  TraceRecorder r;
  const double t0 = r.now_us();
  r.end("fwd.h.0", 0, t0);
  const Json doc = json_parse(trace_document({r.events_json(3), ""}), "trace");
  const Json &ev = doc.find("traceEvents")->array.at(0);
  EXPECT_EQ(ev.find("name")->string, "fwd.h.0");
  EXPECT_EQ(ev.find("pid")->integer, 3);
  EXPECT_EQ(ev.find("ph")->string, "X");
  EXPECT_GE(ev.find("dur")->number, 0);
}

// A process bound to one core (mpirun's default for a lone rank) sizes its
// host loops by that core, not by the machine: eight threads there ran the
// checkpoint encode no faster than one (docs/checkpoints.md). Checked on a thread
// of its own, whose affinity the test may narrow without touching the rest.
TEST(Parallel, HostThreadsFollowTheAffinityMask) {
  int64_t bound = 0, all = 0;
  std::thread t([&] {
    cpu_set_t set;
    ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
    all = available_cores();
    EXPECT_EQ(all, CPU_COUNT(&set));
    int first = 0;
    while (!CPU_ISSET(first, &set))
      ++first;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
    bound = host_threads();
  });
  t.join();
  EXPECT_EQ(bound, 1);
  EXPECT_GE(all, 1);
  EXPECT_EQ(host_threads(3), 3); // a request stands
}
