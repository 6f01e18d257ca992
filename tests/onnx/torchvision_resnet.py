#!/usr/bin/env python3
"""Prints torchvision's resnet18 / resnet50 as PyTorch's TorchScript exporter
writes them in training mode (opset 17: Conv without bias, BatchNormalization
with training_mode 1 and the running statistics as extra outputs, MaxPool 3x3
stride 2 pad 1, the downsample branch, residual Add, GlobalAveragePool,
Flatten, Gemm transB), as a text ModelProto whose initializers hold shapes
but no values: the architecture without torch (the real exports:
bench/onnx/resnet_export.py). Names as torchvision's state_dict.

    python3 tests/onnx/torchvision_resnet.py 50 | protoc --encode=onnx.ModelProto \\
        -I/usr/include onnx/onnx.proto > resnet50.onnx
"""
import sys


def resnet(depth):
    blocks = {18: [2, 2, 2, 2], 34: [3, 4, 6, 3], 50: [3, 4, 6, 3]}[depth]
    bottleneck = depth >= 50
    nodes, inits = [], []

    def init(name, dims):
        inits.append(f'  initializer {{ name: "{name}" data_type: 1 '
                     + " ".join(f"dims: {d}" for d in dims) + " }")

    def ints(name, v):
        return (f'attribute {{ name: "{name}" type: INTS '
                + " ".join(f"ints: {i}" for i in v) + " }")

    def conv(x, cin, cout, k, s, p, pre):
        init(f"{pre}.weight", [cout, cin, k, k])
        nodes.append(f'  node {{ name: "/{pre}/Conv" op_type: "Conv" input: "{x}" '
                     f'input: "{pre}.weight" output: "{pre}.out" {ints("kernel_shape", [k, k])} '
                     f'{ints("strides", [s, s])} {ints("pads", [p] * 4)} }}')
        return f"{pre}.out"

    def bn(x, c, pre):
        for s in ("weight", "bias", "running_mean", "running_var"):
            init(f"{pre}.{s}", [c])
        ins = " ".join(f'input: "{pre}.{s}"' for s in ("weight", "bias", "running_mean", "running_var"))
        nodes.append(f'  node {{ name: "/{pre}/BatchNormalization" op_type: "BatchNormalization" '
                     f'input: "{x}" {ins} output: "{pre}.out" output: "{pre}.mean_out" '
                     f'output: "{pre}.var_out" attribute {{ name: "epsilon" type: FLOAT f: 1e-05 }} '
                     'attribute { name: "momentum" type: FLOAT f: 0.9 } '
                     'attribute { name: "training_mode" type: INT i: 1 } }')
        return f"{pre}.out"

    def relu(x, pre):
        nodes.append(f'  node {{ name: "/{pre}/Relu" op_type: "Relu" input: "{x}" output: "{pre}.relu" }}')
        return f"{pre}.relu"

    x = relu(bn(conv("x", 3, 64, 7, 2, 3, "conv1"), 64, "bn1"), "relu")
    nodes.append(f'  node {{ name: "/maxpool/MaxPool" op_type: "MaxPool" input: "{x}" output: "pool" '
                 f'{ints("kernel_shape", [3, 3])} {ints("strides", [2, 2])} {ints("pads", [1] * 4)} }}')
    x, cin = "pool", 64
    for li, (n, w) in enumerate(zip(blocks, (64, 128, 256, 512))):
        for b in range(n):
            pre, s = f"layer{li + 1}.{b}", 2 if b == 0 and li > 0 else 1
            cout = 4 * w if bottleneck else w
            if bottleneck:
                h = relu(bn(conv(x, cin, w, 1, 1, 0, pre + ".conv1"), w, pre + ".bn1"), pre + ".r1")
                h = relu(bn(conv(h, w, w, 3, s, 1, pre + ".conv2"), w, pre + ".bn2"), pre + ".r2")
                h = bn(conv(h, w, cout, 1, 1, 0, pre + ".conv3"), cout, pre + ".bn3")
            else:
                h = relu(bn(conv(x, cin, w, 3, s, 1, pre + ".conv1"), w, pre + ".bn1"), pre + ".r1")
                h = bn(conv(h, w, w, 3, 1, 1, pre + ".conv2"), w, pre + ".bn2")
            identity = x
            if s != 1 or cin != cout:
                identity = bn(conv(x, cin, cout, 1, s, 0, pre + ".downsample.0"), cout,
                              pre + ".downsample.1")
            nodes.append(f'  node {{ name: "/{pre}/Add" op_type: "Add" input: "{h}" '
                         f'input: "{identity}" output: "{pre}.sum" }}')
            x, cin = relu(f"{pre}.sum", pre + ".r3"), cout
    nodes.append(f'  node {{ name: "/avgpool/GlobalAveragePool" op_type: "GlobalAveragePool" '
                 f'input: "{x}" output: "gap" }}')
    nodes.append('  node { name: "/Flatten" op_type: "Flatten" input: "gap" output: "flat" '
                 'attribute { name: "axis" type: INT i: 1 } }')
    init("fc.weight", [1000, cin])
    init("fc.bias", [1000])
    nodes.append('  node { name: "/fc/Gemm" op_type: "Gemm" input: "flat" input: "fc.weight" '
                 'input: "fc.bias" output: "logits" attribute { name: "transB" type: INT i: 1 } }')
    shape = ('dim { dim_param: "batch" } dim { dim_value: 3 } dim { dim_value: 224 } '
             'dim { dim_value: 224 }')
    return "\n".join([
        'ir_version: 8', 'opset_import { domain: "" version: 17 }',
        f'graph {{\n  name: "resnet{depth}"', *nodes, *inits,
        f'  input {{ name: "x" type {{ tensor_type {{ elem_type: 1 shape {{ {shape} }} }} }} }}',
        '  output { name: "logits" type { tensor_type { elem_type: 1 shape { '
        'dim { dim_param: "batch" } dim { dim_value: 1000 } } } } }', "}"])


if __name__ == "__main__":
    print(resnet(int(sys.argv[1])))
