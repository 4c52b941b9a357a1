#!/usr/bin/env python3
"""Write the hand-made seeds of tests/fuzz/corpus/ (valid and invalid
inputs, and the regression inputs of the dataset size checks).

    python3 tests/fuzz/make_seeds.py [CORPUS_DIR]

Inputs found by fuzzing are added beside these (docs/fuzzing.md); this
script only rewrites the files it names.
"""
import gzip
import os
import struct
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus")


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def gz(b):
    return gzip.compress(b, compresslevel=9, mtime=0)


# --- idx: flags byte, images length (u16 le), images, labels (fuzz_idx.c)
def images(n, rows, cols, body=None):
    h = struct.pack(">IIII", 0x803, n, rows, cols)
    return h + (body if body is not None else bytes((7 * i) % 256 for i in range(n * rows * cols)))


def labels(n, vals=None):
    return struct.pack(">II", 0x801, n) + bytes(vals if vals is not None else [i % 10 for i in range(n)])


def idx(flags, im, lb):
    return struct.pack("<BH", flags, len(im)) + im + lb


im5, lb5 = images(5, 2, 3), labels(5)
put("idx", "valid-plain", idx(0, im5, lb5))
put("idx", "valid-gzip-both", idx(3, im5, lb5))
put("idx", "valid-limit-2", idx(2 << 2, im5, lb5))
put("idx", "valid-prezipped", idx(0, gz(im5), gz(lb5)))
put("idx", "valid-two-members", idx(0, gz(im5[:20]) + gz(im5[20:]), lb5))
put("idx", "huge-dims-plain", idx(0, images(1000, 4096, 4096, bytes(100)), lb5))
put("idx", "huge-dims-gzip", idx(1, images(1000, 4096, 4096, bytes(100)), lb5))
put("idx", "dims-overflow", idx(0, images(5, 0xFFFFFFFF, 0xFFFFFFFF, b""), lb5))
put("idx", "zero-images", idx(0, images(0, 28, 28, b""), labels(0)))
put("idx", "truncated-gzip", idx(0, gz(im5)[:-12], lb5))
put("idx", "gzip-no-trailer", idx(0, gz(im5)[:-5], lb5))
put("idx", "bad-magic", idx(0, struct.pack(">I", 0x802) + im5[4:], lb5))
put("idx", "label-count", idx(0, im5, labels(4)))
put("idx", "label-value", idx(0, im5, labels(5, [0, 1, 2, 12, 4])))
put("idx", "trailing-data", idx(0, im5 + b"\0\0\0", lb5))
put("idx", "short-header", idx(0, im5[:10], lb5))

# --- libsvm: flags byte (features, classes, limit), then text (fuzz_libsvm.c)
def svm(features_sel, classes, text, limit=0):
    return bytes([features_sel | (classes - 2) << 2 | limit << 5]) + text.encode()


put("libsvm", "valid-sparse", svm(0, 3, "# comment\n1 1:0.5 3:2\n\n0 1:1 2:0 3:-1 4:0.25  # dense\n2\n"))
put("libsvm", "valid-features-4", svm(1, 3, "1 1:1 4:2\n0 2:3\n"))
put("libsvm", "valid-limit", svm(0, 2, "1 1:1\n0 2:1\n1 3:1\n", limit=2))
put("libsvm", "max-index", svm(3, 2, "1 1:1 7:2\n0 1000000000:0.5\n"))
put("libsvm", "index-over-max", svm(0, 2, "1 1:1\n0 1000000001:0.5\n"))
put("libsvm", "index-over-features", svm(1, 3, "1 5:1\n"))
put("libsvm", "index-zero", svm(0, 3, "1 0:1\n"))
put("libsvm", "bad-label", svm(0, 3, "x 1:1\n1.5 2:1\n"))
put("libsvm", "label-range", svm(0, 3, "7 1:1\n"))
put("libsvm", "bad-value", svm(0, 3, "1 3:abc\n1 2:nan\n1 2:1e99\n"))
put("libsvm", "bad-token", svm(0, 3, "1 1:0.5\n0 2=1\n1 :3\n"))
put("libsvm", "no-rows", svm(0, 3, "# nothing\n\n"))
put("libsvm", "crlf", svm(0, 3, "1 1:1\r\n0 2:2\r\n"))

# --- config: the experiment file; lines after "#--set" are --set (fuzz_config.c)
put("config", "valid-local", "name: t\nworkers: 1\nworkload: {dataset: synthetic, model: softmax, epochs: 1}\nengines: [local]\n")
put("config", "valid-sweep", "workers: [1, 2]\nrepeat: 2\nworkload:\n  model: mlp\n  hidden: [[8], [16, 8]]\n"
    "  lr: [0.1, 0.05]\nengines:\n  - local\n  - {engine: ps, mode: ssp, staleness: [0, 2]}\n")
put("config", "valid-sets", "engines: [local]\n#--set\nworkers=[2,4]\nworkload.lr=0.5\nengines.0.transport=zmq\n")
put("config", "empty", "")
put("config", "not-a-mapping", "- a\n- b\n")
put("config", "unknown-key", "engines: [local]\nworkerz: 2\n")
put("config", "bad-yaml", "engines: [local\nworkers: {\n")
put("config", "bad-value", "engines: [{engine: ps, mode: sideways}]\nworkers: -3\n")
put("config", "no-engines", "name: x\n")
put("config", "anchors", "workers: &w 2\nengines: [local, {engine: ps, servers: *w}]\n")
put("config", "bad-set", "engines: [local]\n#--set\nnokey\n=3\nengines.9.x=1\n")

# --- ps_hdr: one message, 64-byte header + payload (fuzz_ps_hdr.c)
def hdr(typ, shard, flags, clock, version, offset, count, magic=0x50534731, proto=1):
    return struct.pack("=IHHiIqqQQdq", magic, proto, typ, shard, flags, clock, version,
                       offset, count, 0.0, -1)


PUSH, PULL, PARAMS, DONE, SPARSE = 1, 2, 3, 4, 1
put("ps_hdr", "push-dense", hdr(PUSH, 0, 0, 3, 2, 0, 64) + struct.pack("64f", *range(64)))
put("ps_hdr", "pull-dense", hdr(PULL, 2, 0, 4, 0, 128, 17))
put("ps_hdr", "params-dense", hdr(PARAMS, 2, 0, 4, 9, 128, 17) + struct.pack("17f", *range(17)))
put("ps_hdr", "push-sparse", hdr(PUSH, 0, SPARSE, 1, 0, 0, 3) + struct.pack("3I3f", 0, 5, 63, 1, 2, 3))
put("ps_hdr", "pull-sparse", hdr(PULL, 3, SPARSE, 1, 0, 1 << 20, 2) + struct.pack("2I", 4095, 0))
put("ps_hdr", "done", hdr(DONE, 1, 0, 7, 0, 64, 0))
put("ps_hdr", "empty-shard", hdr(PUSH, 1, 0, 0, 0, 64, 0))
put("ps_hdr", "bad-magic", hdr(PUSH, 0, 0, 0, 0, 0, 64, magic=0x12345678) + bytes(256))
put("ps_hdr", "short", hdr(PULL, 0, 0, 0, 0, 0, 64)[:40])
put("ps_hdr", "sparse-index-out", hdr(PUSH, 0, SPARSE, 1, 0, 0, 1) + struct.pack("If", 64, 1))
put("ps_hdr", "count-too-big", hdr(PUSH, 0, SPARSE, 1, 0, 0, 1 << 62) + bytes(16))
put("ps_hdr", "payload-mismatch", hdr(PARAMS, 0, 0, 1, 0, 0, 64) + bytes(12))
