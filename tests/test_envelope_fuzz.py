"""Bounded fuzzing of the benchmark-output parsers (what `mtcenvelope import` runs on a file):
mutations of every recorded output must give valid points or a ParseError that names the file,
never another exception (TypeError, ZeroDivisionError, RecursionError ... were tracebacks)."""
import math
import random
import re
import time
from pathlib import Path

import pytest

from mtcio.envelope.drivers import parse_text
from mtcio.envelope.points import UNITS, ParseError, Point

FIX = Path(__file__).parent / "fixtures"        # the recorded outputs of every tool, all in the repository
SECONDS = 8.0

NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?")
BAD_NUMBERS = [b"-1", b"0", b"-0.5", b"-2048.5", b"nan", b"inf", b"-inf", b"1e999", b"9" * 40,
               b"-", b"", b"0.0", b"1e-320", b"NaN", b"Infinity", b"\"x\"", b"null", b"[]", b"{}"]


def seeds():
    out = []
    for tool in ("ior", "mdtest", "fio", "iozone"):
        for p in sorted((FIX / tool).glob("*")):
            if p.is_file() and p.suffix in (".json", ".txt", ".out", "") and p.name != "README.md":
                out.append(p.read_bytes())
    return out


def mutate(rng: random.Random, data: bytes) -> bytes:
    kind = rng.randrange(8)
    n = len(data)
    if kind == 0:                                   # cut
        return data[:rng.randrange(n + 1)]
    if kind == 1:                                   # delete a run of bytes
        i = rng.randrange(n + 1)
        return data[:i] + data[i + rng.randrange(1, 64):]
    if kind == 2:                                   # random bytes in place
        b = bytearray(data)
        for _ in range(rng.randrange(1, 8)):
            b[rng.randrange(n)] = rng.randrange(256)
        return bytes(b)
    if kind in (3, 4, 5):                           # numbers turned implausible
        nums = list(NUMBER.finditer(data))
        picked = rng.sample(nums, min(len(nums), rng.randrange(1, 6)))
        for m in sorted(picked, key=lambda m: -m.start()):     # from the end: offsets hold
            data = data[:m.start()] + rng.choice(BAD_NUMBERS) + data[m.end():]
        return data
    if kind == 6:                                   # a line repeated or moved
        lines = data.split(b"\n")
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines.insert(j, lines[i])
        return b"\n".join(lines)
    # deep nesting where a JSON value is
    i = data.find(b"{")
    depth = rng.choice([50, 5000, 100000])
    return data[:i + 1] + b'"x": ' + b"[" * depth + b"1" + b"]" * rng.choice([0, depth]) + \
        b"," + data[i + 1:] if i >= 0 else data + b"[" * depth


def check_points(pts):
    assert pts, "a parser returned no points instead of a ParseError"
    for p in pts:
        assert isinstance(p, Point) and p.unit == UNITS[p.metric]
        assert p.file_size >= 0 and p.procs_per_host >= 1 and p.hosts >= 1 and p.repeat >= 0
        if p.ok:
            assert math.isfinite(p.value) and p.value >= 0
        else:
            assert p.error


def test_mutated_outputs_give_points_or_a_parse_error_naming_the_file():
    data = seeds()
    assert len(data) >= 30
    rng = random.Random(20261123)
    t0 = time.monotonic()
    n = ok = refused = 0
    while time.monotonic() - t0 < SECONDS:
        text = mutate(rng, rng.choice(data)).decode("utf-8", errors="replace")
        src = f"fuzz-{n}.out"
        n += 1
        try:
            pts = parse_text(text, {"source": src})
        except ParseError as e:
            assert str(e).startswith(f"{src}: ") and e.reason, str(e)
            refused += 1
            continue
        except Exception as e:   # noqa: BLE001 - the failure this test is for
            pytest.fail(f"{type(e).__name__} on mutation {n}: {e}\n--- input ---\n{text[:2000]}")
        check_points(pts)
        ok += 1
    print(f"{n} mutated outputs: {ok} parsed, {refused} refused with ParseError")
    assert n >= 2000 and ok >= 100 and refused >= 100


@pytest.mark.parametrize("text,reason", [
    ("{" * 200000, "fio JSON is truncated"),
    ('{"fio version": "fio-3.33", "jobs": [' + "[" * 100000 + "]" * 100000 + "]}",
     "nested too deeply"),
])
def test_deep_nesting_is_a_parse_error(text, reason):
    with pytest.raises(ParseError) as e:
        parse_text(text, {"source": "deep.json"}, "fio")
    assert str(e.value).startswith("deep.json: ") and reason in str(e.value)


def test_implausible_numbers_are_refused():
    ior = (FIX / "ior" / "ior-gfarm-fpp-t1m-np2.json").read_text()
    neg = re.sub(r'"bwMiB": [0-9.]+', '"bwMiB": -12.5', ior, count=1)
    with pytest.raises(ParseError, match=r"^neg\.json: .*bandwidth -12.5 MiB/s is not a rate"):
        parse_text(neg, {"source": "neg.json"})
    zero = re.sub(r'"nodes": \d+', '"nodes": 0', ior)
    with pytest.raises(ParseError, match=r"^zero\.json: nodes = 0: a run needs at least one"):
        parse_text(zero, {"source": "zero.json"})
    bsz = re.sub(r'"blockSize": \d+', '"blockSize": 0', ior)
    with pytest.raises(ParseError, match=r"^b\.json: block size 0 .* no data per rank"):
        parse_text(bsz, {"source": "b.json"})
    md = (FIX / "mdtest" / "mdtest-gfarm-n200-np4.txt").read_text()
    with pytest.raises(ParseError, match=r"^m\.txt: launched with 0 task\(s\)"):
        parse_text(md.replace("with 4 total task(s)", "with 0 total task(s)"),
                   {"source": "m.txt"})
