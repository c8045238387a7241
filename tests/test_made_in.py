"""Where a program made its ops, read off its source: honest ways of averaging keep their
place; every claim three attacks made of a line that did not make the op is refused."""

from __future__ import annotations

import pytest

from simsync.tf_backend.program.made_in import Source, made_in

HEAD = "import functools\nimport tensorflow as tf\nfrom tensorflow import add_n\n"


def _place(body: str, marker: str, op_type: str, files: dict[str, str] | None = None) -> str | None:
    """Where a claim of ``op_type`` made on the line holding ``marker`` in train.py lands."""
    text = HEAD + body
    line = 1 + next(i for i, row in enumerate(text.splitlines()) if marker in row)
    sources = {"train.py": text.encode(), **{k: v.encode() for k, v in (files or {}).items()}}
    return made_in(Source.of(sources, "train.py"), "train.py", line, op_type, joins=True)


AVERAGE = "def average_gradients(g):\n    return "


@pytest.mark.parametrize(
    ("body", "op_type"),
    [
        ("def average_gradients(g):\n    return tf.concat(g, 0)  # here\n", "ConcatV2"),
        ("def average_gradients(g):\n    return tf.add_n(g)  # here\n", "AddN"),
        ("def average_gradients(g):\n    return add_n(g)  # here\n", "AddN"),
        ("def average_gradients(g):\n    return sum(g)  # here\n", "AddV2"),
        ("def average_gradients(g):\n    return g[0] + g[1]  # here\n", "AddV2"),
        ("def average_gradients(g):\n    return functools.reduce(tf.add, g)  # here\n", "AddV2"),
        ("def average_gradients(g):\n    return tf.stack(g)  # here\n", "Pack"),
        ("def average_gradients(g):\n    return tf.reduce_mean([g[0], g[1]], 0)  # here\n", "Pack"),
        (
            "def average_gradients(g):\n    return tf.dynamic_stitch(g, g)  # here\n",
            "DynamicStitch",
        ),
        ("def average_gradients(g):\n    return tf.compat.v1.concat(g, 0)  # here\n", "ConcatV2"),
        # the third: TensorFlow by another name, at the file's top
        ("tf1 = tf.compat.v1\ndef average_gradients(g):\n    return tf1.concat(g, 0)  # here\n",
         "ConcatV2"),
    ],
)  # fmt: skip
def test_an_honest_line_keeps_its_place(body: str, op_type: str) -> None:
    assert (_place(body, "# here", op_type) or "").startswith("average_gradients (train.py:")


MEAN = "def _mean(g):\n    return tf.concat(g, 0)\n"


@pytest.mark.parametrize(
    ("body", "files"),
    [
        # the first attack
        (MEAN + "def average_gradients(g):\n    e = [tf.expand_dims(x, 0) for x in g]  # claim\n"
         "    return _mean(e)\n", None),
        (MEAN + "def average_gradients(g):\n    return _mean(g)  # claim\n", None),
        (MEAN + "import mymath\ndef average_gradients(g):\n    return mymath.concat(g)  # claim\n",
         {"mymath.py": "import tensorflow as tf\ndef concat(g):\n    return tf.concat(g, 0)\n"}),
        # the second: a lambda, an alias, getattr, an own class's method named concat
        (MEAN + "def average_gradients(g):\n    return _mean((lambda x: x)(g))  # claim\n", None),
        (MEAN + "def average_gradients(g):\n    concat = _mean\n    return concat(g)  # claim\n",
         None),
        (MEAN + "def average_gradients(g):\n"
         "    return _mean(getattr(list, '__call__', list)(g))  # claim\n", None),
        ("class L(list):\n    def concat(self, axis):\n        return tf.concat(self, axis)\n"
         "def average_gradients(g):\n    return L(g).concat(axis=0)  # claim\n", None),
        (MEAN + "def average_gradients(g, concat=_mean):\n    return concat(g)  # claim\n", None),
        # the third: a star import's alias, a parameter named tf, tf replaced in a function,
        # names put where no reading follows, a match's capture
        ("from helpers import *\ndef average_gradients(g):\n    return concat(g)  # claim\n",
         {"helpers.py": MEAN + "concat = _mean\n"}),
        (MEAN + "class _Ops:\n    concat = staticmethod(_mean)\n"
         "def average_gradients(g, tf=_Ops()):\n    return tf.concat(g, 0)  # claim\n", None),
        (MEAN + "def average_gradients(g):\n    tf = _Ops()\n    return tf.concat(g, 0)  # claim\n"
         "class _Ops:\n    concat = staticmethod(_mean)\n", None),
        (MEAN + "import builtins\nbuiltins.concat = _mean\n"
         "def average_gradients(g):\n    return concat(g)  # claim\n", None),
        (MEAN + "globals()['concat'] = _mean\n"
         "def average_gradients(g):\n    return concat(g)  # claim\n", None),
        (MEAN + "exec('def concat(g): return _mean(g)')\n"
         "def average_gradients(g):\n    return concat(g)  # claim\n", None),
        (MEAN + "tf.concat = lambda g, axis: _mean(g)\n"
         "def average_gradients(g):\n    return tf.concat(g, 0)  # claim\n", None),
        (MEAN + "import sys\nsys.modules['fake'] = None\n"
         "def average_gradients(g):\n    return tf.concat(g, 0)  # claim\n", None),
        (MEAN + "def average_gradients(g):\n    match _mean:\n        case concat:\n"
         "            return concat(g)  # claim\n", None),
    ],
)  # fmt: skip
def test_a_claim_of_a_line_that_makes_no_such_op_by_name_is_refused(body, files) -> None:
    assert _place(body, "# claim", "ConcatV2", files) is None


@pytest.mark.parametrize(
    "body",
    ["if False:\n    import avg\n", "def _never():\n    import avg\n",
     "class Never:\n    import avg\n"],
)  # fmt: skip
def test_a_file_imported_only_where_it_may_never_run_made_nothing(body: str) -> None:
    avg = "import tensorflow as tf\ndef average_gradients(g):\n    return tf.concat(g, 0)\n"
    program = Source.of({"train.py": (HEAD + body).encode(), "avg.py": avg.encode()}, "train.py")
    assert made_in(program, "avg.py", 3, "ConcatV2", joins=True) is None
    imported = Source.of({"train.py": (HEAD + "import avg\n").encode(), "avg.py": avg.encode()},
                         "train.py")  # fmt: skip
    assert made_in(imported, "avg.py", 3, "ConcatV2", joins=True) == "average_gradients (avg.py:3)"


def test_a_file_nested_past_reading_names_no_place_and_crashes_nothing() -> None:
    bomb = "x = " + "+".join(["1"] * 50_000) + "\n"
    deep = "x = " + "(" * 5000 + "1" + ")" * 5000 + "\n"
    program = Source.of(
        {"train.py": (HEAD + "import bomb\n").encode(), "bomb.py": bomb.encode(),
         "deep.py": deep.encode()}, "train.py",
    )  # fmt: skip
    assert made_in(program, "bomb.py", 1, "AddV2", joins=True) is None
    assert made_in(program, "deep.py", 1) is None
