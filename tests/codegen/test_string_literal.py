"""`c_string_literal`'s fast path (printable ASCII: str.replace + greedy cuts) gives exactly the
token loop's output, for every line width; the executor's weights array equals `ConstantTable.blob`."""
import random

import numpy as np

from ingot.codegen.prelude import _escape_tokens, _literal_lines, c_string_literal


def test_fast_path_equals_token_loop():
    rng = random.Random(0)
    alphabets = ['ab?"\\\n\t\r */' + "x" * 6, 'ab?"\\\n\t\r */xxé\x01']
    for n in range(4000):
        s = "".join(rng.choice(alphabets[n % 2]) for _ in range(rng.randint(0, 50)))
        for max_line in (0, 1, 2, 3, 5, 8, 100):
            assert c_string_literal(s, max_line) == _literal_lines(_escape_tokens(s), max_line), (s, max_line)


def test_weights_array_equals_blob():
    from ingot.graph import Constant
    from ingot.graph.executor import _weights_array
    from ingot.graph.plan import ConstantTable

    consts = ConstantTable()
    for a in (np.arange(3, dtype="float32"), np.array([True, False, True]), np.arange(5, dtype="int64").reshape(5, 1),
              np.float64(2.5), np.arange(7, dtype="int8")):
        consts.add(Constant(np.asarray(a)))
    out = _weights_array(consts)
    blob = consts.blob()
    assert out.dtype == np.uint8 and out.ctypes.data % 64 == 0
    assert bytes(out[:len(blob)]) == blob and not out[len(blob):].any()
