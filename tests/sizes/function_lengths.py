#!/usr/bin/env python3
"""Lists the C++ functions longer than LIMIT lines under the folders given.

  function_lengths.py LIMIT DIR... (exit 1 when one is longer)

A function's length counts from the first line of its signature to its closing
brace; lambdas and local classes count toward the function holding them, a
class's inline member functions each on their own. Comments, string and
character literals are blanked first, so braces inside them do not count. A
heuristic scanner, not a parser: enough for code clang-format laid out.
"""
import pathlib
import re
import sys

SCOPE = re.compile(r'^(template\s*<.*>\s*)?(namespace|class|struct|union|enum|extern)\b')


def blank(src):
    """src with comments and literals replaced by spaces (newlines kept)."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith('//', i):
            j = src.find('\n', i)
            j = n if j < 0 else j
        elif src.startswith('/*', i):
            j = src.find('*/', i + 2)
            j = n if j < 0 else j + 2
        elif src.startswith('R"', i) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == '_')):
            m = re.match(r'R"([^(\s]*)\(', src[i:])
            close = ')' + m.group(1) + '"'
            j = src.find(close, i) + len(close)
        elif c in '"\'':
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == '\\' else 1
            j += 1
        else:
            out.append(c)
            i += 1
            continue
        out.append(re.sub(r'[^\n]', ' ', src[i:j]))
        i = j
    return ''.join(out)


def functions(text):
    """(first line, last line, name) of every function body in text."""
    s = blank(text)
    stack = []  # (kind, first line, head) per open brace; kind: scope, func, other
    last = 0  # where the current declaration's head starts
    found = []
    for i, c in enumerate(s):
        in_func = any(k == 'func' for k, _, _ in stack)
        if c == '{':
            head = s[last:i]
            kind = 'other'
            if not in_func:
                h = ' '.join(head.split())
                if SCOPE.match(h) or h == '':
                    kind = 'scope'
                elif '(' in h and not h.endswith('='):
                    kind = 'func'
            first = s.count('\n', 0, last + len(head) - len(head.lstrip())) + 1
            stack.append((kind, first, head))
            last = i + 1
        elif c == '}':
            kind, first, head = stack.pop()
            if kind == 'func':
                names = re.findall(r'([\w:~]+)\s*\(', head)
                found.append((first, s.count('\n', 0, i) + 1, names[0] if names else '?'))
            if not any(k == 'func' for k, _, _ in stack):
                last = i + 1
        elif c == ';' and not in_func:
            last = i + 1
    return found


def main():
    limit = int(sys.argv[1])
    long_ones = 0
    for folder in sys.argv[2:]:
        for path in sorted(pathlib.Path(folder).rglob('*')):
            if path.suffix not in ('.cpp', '.h', '.cc', '.hpp') or not path.is_file():
                continue
            for first, end, name in functions(path.read_text()):
                if end - first + 1 > limit:
                    print(f'{path}:{first}: {name} is {end - first + 1} lines (at most {limit})')
                    long_ones += 1
    print(f'{long_ones} function(s) over {limit} lines')
    return 1 if long_ones else 0


if __name__ == '__main__':
    sys.exit(main())
