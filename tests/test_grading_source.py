"""A graded program's source keeps to TensorFlow's public API: what would change the process
that exports its graph (TensorFlow's code, Python's, the grader's) is refused before it runs,
and the programs people write pass."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from simsync.grading.source import MOST_BYTES, check_program, check_source

ROOT = Path(__file__).resolve().parents[1]

#: each way a program could change what its process exports or reports, and a word the
#: refusal must hold
REFUSED = {
    "private attribute": ("op = tf.no_op()\nop._set_attr('T', None)", "`op._set_attr`"),
    "patched export": (
        "tf.compat.v1.train.export_meta_graph = print",
        "sets `tf.compat.v1.train.export_meta_graph`",
    ),
    "patched through an alias": ("t = tf.compat.v1.train\nt.export_meta_graph = print", "sets"),
    "patched through a call": ("tf.compat.v1.get_default_graph().x = 1", "sets"),
    "patched json": ("import json\njson.dumps = repr", "sets `json.dumps`"),
    "a function's argument": ("def f(m):\n    m.export_meta_graph = print\nf(tf)", "sets"),
    "self of a plain function": ("def f(self):\n    self.x = print\nf(tf)", "sets"),
    "a method called on its class": (
        "class H(object):\n    def set(self):\n        self.x = 1\nH.set(tf)",
        "`H.set`",
    ),
    "instance of a TensorFlow class": ("g = tf.Graph()\ng.as_graph_def = print", "sets"),
    "a module kept by an object of its own": (
        "class C(object):\n    pass\nc = C()\nc.m = tf.compat.v1.train\nc.m.export_meta_graph = 1",
        "sets `c.m.export_meta_graph`",
    ),
    "a module kept by self": (
        "class C(object):\n    def f(self):\n        self.m = tf\n        self.m.x = 1",
        "sets `self.m.x`",
    ),
    "options of its own class": (
        "class ConfigProto(object):\n    pass\nc = ConfigProto()\nc.m = tf\nc.m.x = 1",
        "sets `c.m.x`",
    ),
    "options made by a name it bound": (
        "class C(object):\n    pass\nConfigProto = C\nc = ConfigProto()\nc.m = tf\nc.m.x = 1",
        "sets `c.m`",
    ),
    "a class's name bound to a module": (
        "class C(object):\n    pass\nC = lambda: tf\nC().x = 1",
        "sets",
    ),
    "an object of a class rebound": (
        "class C(object):\n    pass\nC = lambda: tf\nc = C()\nc.x = 1",
        "sets `c.x`",
    ),
    "a class decorated": ("@lambda c: lambda: tf\nclass C(object):\n    pass", "decorator"),
    "a static method's self": (
        "class C(object):\n    @staticmethod\n    def f(self):\n        self.x = 1",
        "sets `self.x`",
    ),
    "a method aliased in its class": (
        "class P(object):\n    def put(self, v):\n        self.x = v\n"
        "    put2 = staticmethod(put)\nP().put2(tf, 1)",
        "sets `self.x`",
    ),
    "a method kept in a list": (
        "class P(object):\n    def put(self, v):\n        self.x = v\n"
        "    fs = [put]\nP().fs[0](tf, 1)",
        "sets `self.x`",
    ),
    "a method read off its class": (
        "class P(object):\n    def put(self, v):\n        self.x = v\nP.put(tf, 1)",
        "`P.put`",
    ),
    "builtins imported from another module": (
        "from dataclasses import builtins as b\nb.eval('setattr')",
        "`dataclasses.builtins`",
    ),
    "eval of a module": ("import json\njson.eval('1')", "`json.eval`"),
    "a banned name imported": ("from sys import modules", "`sys.modules`"),
    "a private name imported": ("from sys import _getframe", "`sys._getframe`"),
    "tensorflow's api package": ("from tensorflow._api.v2.compat.v1 import train", "internal"),
    "keras internals": ("import keras.src.utils", "`keras.src.utils`"),
    "pickles by place": ("np.load('x.npy', None, True)", "by place"),
    "keras unsafe by place": ("tf.keras.models.load_model('m', None, True, False)", "by place"),
    "a base imported under an allowed name": (
        "from tensorflow import Graph as Model\nclass G(Model):\n    pass",
        "derives from `Model`",
    ),
    "a base bound to an allowed name": (
        "Model = tf.Graph\nclass G(Model):\n    pass",
        "derives from `Model`",
    ),
    "options imported under their name": (
        "from tensorflow import Graph as ConfigProto\nc = ConfigProto()\nc.as_graph_def = 1",
        "sets `c.as_graph_def`",
    ),
    "a decorator imported as dataclass": (
        "from tensorflow import function as dataclass\n@dataclass\nclass C(object):\n    pass",
        "decorator",
    ),
    "a module kept by a namespace": (
        "import argparse\nns = argparse.Namespace()\nns.t = tf.compat.v1.train\n"
        "ns.t.export_meta_graph = 1",
        "sets `ns.t`",
    ),
    "self of a method an own decorator wraps": (
        "def deco(f):\n    return lambda s: f(tf)\nclass C(object):\n"
        "    @deco\n    def put(self):\n        self.x = 1",
        "sets `self.x`",
    ),
    "a method reached through an alias of its class": (
        "class C(object):\n    def f(self):\n        self.x = 1\nK = C\nK.f(tf)",
        "its class `C`",
    ),
    "a method reached through a tuple": (
        "class C(object):\n    def f(self):\n        self.x = 1\n(C,)[0].f(tf)",
        "its class `C`",
    ),
    "a classmethod's cls given on": (
        "class C(object):\n    def f(self):\n        self.x = 1\n"
        "    @classmethod\n    def g(cls):\n        cls.f(tf)",
        "`cls.f`",
    ),
    "a property's setter taken": (
        "class C(object):\n    @property\n    def p(self):\n        return 1\nC().p.fset",
        "fset",
    ),
    "a loop's variable": ("for m in [tf]:\n    m.x = 1", "sets"),
    "a with's variable": ("with open('x') as f:\n    f.name = 1", "sets"),
    "setattr": ("setattr(tf, 'x', 1)", "`setattr`"),
    "setattr passed on": ("f = setattr", "`setattr`"),
    "getattr of a computed name": ("getattr(tf, '_' + 'x')", "computes"),
    "getattr of a private name": ("getattr(tf, '_x')", "'_'"),
    "getattr passed on": ("import functools\nfunctools.reduce(getattr, ['a'], tf)", "getattr"),
    "exec": ("exec('x = 1')", "`exec`"),
    "eval": ("eval('1')", "`eval`"),
    "compile": ("compile('1', 'x', 'eval')", "`compile`"),
    "globals": ("globals()['tf'] = None", "`globals`"),
    "vars": ("vars(tf)", "`vars`"),
    "a method of a type": ("class C(object):\n    pass\ntype(C()).f(tf)", "object's class"),
    "type with three arguments": ("C = type('C', (object,), {})", "`type`"),
    "__import__": ("__import__('os')", "`__import__`"),
    "__builtins__": ("__builtins__", "`__builtins__`"),
    "a dunder attribute": ("f = print.__self__", "`print.__self__`"),
    "an audit hook's code": ("def h():\n    pass\nh.__code__ = None", "__code__"),
    "a frame's globals": ("import sys\nsys.exc_info()[2].tb_frame", "tb_frame"),
    "logging's frame": ("import logging\nlogging.currentframe()", "currentframe"),
    "sys.modules": ("import sys\nsys.modules['json'] = None", "sys.modules"),
    "sys.path": ("import sys\nsys.path.insert(0, '.')", "sys.path"),
    "sys.path through os": ("import os\nos.sys.path.insert(0, '.')", "os.sys"),
    "settrace": ("import threading\nthreading.settrace(print)", "settrace"),
    "an item of a module": ("import sys\nsys.argv[0] = 'x'", "a part of a module"),
    "importlib": ("import importlib", "`importlib`"),
    "ctypes": ("import ctypes", "`ctypes`"),
    "inspect": ("from inspect import currentframe", "`inspect.currentframe`"),
    "its own module": ("import helpers", "`helpers`"),
    "a relative import": ("from . import helpers", "own folder"),
    "import star": ("from os import *", "`*`"),
    "tensorflow's internals": (
        "from tensorflow.python.framework import ops",
        "`tensorflow.python.framework.ops`",
    ),
    "native ops": ("tf.load_op_library('x.so')", "load_op_library"),
    "a filesystem plugin": ("tf.experimental.register_filesystem_plugin('x.so')", "plugin"),
    "memory by strides": ("np.lib.stride_tricks.as_strided(np.zeros(1), (9,), (8,))", "strided"),
    "pickles": ("np.load('x.npy', allow_pickle=True)", "allow_pickle"),
    "keras unsafe": ("tf.keras.models.load_model('m', safe_mode=False)", "safe_mode"),
    "namespace by keyword": (
        "import argparse\nargparse.ArgumentParser().parse_args([], namespace=tf)",
        "namespace",
    ),
    "namespace by place": ("import argparse\nargparse.ArgumentParser().parse_args([], tf)", "name"),
    "update_wrapper": ("import functools\nfunctools.update_wrapper(tf, print)", "update_wrapper"),
    "six's builtins": ("import six\nsix.moves.builtins.setattr", "six"),
    "a metaclass": ("class C(object, metaclass=abc.ABCMeta):\n    pass", "metaclass"),
    "a base of TensorFlow's": ("class G(tf.Graph):\n    pass", "`tf.Graph`"),
    "__getattr__": ("class C(object):\n    def __getattr__(self, n):\n        pass", "__getattr__"),
    "__new__": ("class C(object):\n    def __new__(cls):\n        return tf", "__new__"),
    "self rebound": (
        "class C(object):\n    def f(self):\n        self = tf\n        self.x = 1",
        "sets",
    ),
    "a module's attribute deleted": ("del tf.compat", "sets `tf.compat`"),
    "a private name called": ("tf.compat.v1.Session()._extend_graph()", "_extend_graph"),
    # the seventeenth attack
    "a class pattern's private attribute": (
        "match tf.no_op():\n    case object(_set_attr=f):\n        f('T', None)",
        "matches the attribute `_set_attr`",
    ),
    "a class pattern's dunder": (
        "match print:\n    case object(__self__=b):\n        pass",
        "`__self__`",
    ),
    "keras.src as an attribute": (
        "import keras\nkeras.src.utils.python_utils.func_load('')",
        "`keras.src.utils.python_utils.func_load`, a module a graded program may not use",
    ),
    "keras.src through tf.keras": ("tf.keras.src.utils", "a module a graded program may not"),
    "logging.config as an attribute": (
        "import logging\nlogging.config.dictConfig({})",
        "a module a graded program may not",
    ),
    "another program in this one's place": (
        "import os\nos.execv('/usr/bin/python3', [])",
        "os.execv",
    ),
    "exec imported by name": ("from os import execve", "os.execve"),
    "sys.path imported by name": ("from sys import path\npath.insert(0, '.')", "sys.path"),
    "code from marshalled bytes": ("import keras\nkeras.utils.func_load", "func_load"),
    # the nineteenth attack's most casual: patching by mock, builtins and test helpers
    "mock": (
        "tf.compat.v1.test.mock.patch.object(tf.compat.v1.train, 'export_meta_graph', print)",
        "`tf.compat.v1.test.mock`",
    ),
    "absl's test helpers": ("from absl.testing import absltest", "absl.testing"),
    "builtins under another name": ("import enum\nenum.bltns.compile", "`enum.bltns`"),
    "numpy's test helpers": ("np.testing.measure('1')", "`np.testing.measure`"),
    "native code by TensorFlow Lite": ("tf.lite.experimental.load_delegate('x')", "tf.lite"),
    "a class's name bound again by an import": (
        "class train(object):\n    export_meta_graph = None\n"
        "from tensorflow.compat.v1 import train\ntrain.export_meta_graph = print",
        "sets `train.export_meta_graph`",
    ),
    "pickle through multiprocessing": (
        "import concurrent.futures\nconcurrent.futures.process.mp",
        "concurrent.futures.process",
    ),
}
# a namespace or flags set by name hold what they are given, but its parts are not its own
REFUSED.update(
    {
        "a module kept by a parsed namespace": (
            "import argparse\nargs = argparse.ArgumentParser().parse_args()\nargs.m = tf\n"
            "args.m.train = None",
            "sets `args.m.train`",
        ),
        "a namespace parsed by something else than a parser": (
            "import argparse\np = argparse.ArgumentParser()\np = np\nargs = p.parse_args()\n"
            "args.x = 1",
            "sets `args.x`",
        ),
        "a module kept by a flag": (
            "from absl import flags\nFLAGS = flags.FLAGS\nFLAGS.lr.x = 1",
            "sets `FLAGS.lr.x`",
        ),
        "a module's own FLAGS": ("import abc as flags\nflags.FLAGS = 1", "sets `flags.FLAGS`"),
        "a private name that only tuples make public, set": (
            "tf._replace = None",
            "sets `tf._replace`",
        ),
    }
)
# the eighteenth attack: a method's self bound again otherwise than by "="
for how, binding in {
    "a pattern's capture": "match m:\n            case self:\n                pass",
    "a sequence pattern's star": "match m:\n            case [*self]:\n                pass",
    "a mapping pattern's rest": "match m:\n            case {**self}:\n                pass",
    "an import": "import os as self",
    "an import from": "from tensorflow import compat as self",
    "an exception": "try:\n            pass\n        except Exception as self:\n            pass",
    "global": "global self",
    "a function inside": "def self():\n            pass",
}.items():
    REFUSED[f"self bound again by {how}"] = (
        f"class P(object):\n    def put(self, m, fn):\n        {binding}\n"
        "        self.export_meta_graph = fn",
        "sets `self.export_meta_graph`",
    )

# the twenty-third attack: a session's own options that rewrite the graph where the grader
# does not (mixed precision in bfloat16 turned a mean's sign in the student's run only)
for how, line in {
    "mixed precision": "c = tf.compat.v1.ConfigProto()\n"
    "c.graph_options.rewrite_options.auto_mixed_precision_onednn_bfloat16 = 1",
    "graph options by keyword": "c = tf.compat.v1.ConfigProto(graph_options=None)",
    "graph options by a dict's key": "c = tf.compat.v1.ConfigProto(**{'graph_options': {}})",
    "XLA for the process": "tf.config.optimizer.set_jit(True)",
    "Grappler for the process": "tf.config.optimizer.set_experimental_options({})",
    "options from bytes": "c = tf.compat.v1.ConfigProto.FromString(b'')",
}.items():
    REFUSED[f"a session's rewriting set by {how}"] = (line, "rewrites or compiles the graph")
# the twenty-fourth attack: the names split so that no constant holds one, and XLA turned on
# for the student's own process from its environment
REFUSED["a session's rewriting named in pieces"] = (
    "c = tf.compat.v1.ConfigProto(**{'graph_' + 'options': {'rewrite_' + 'options': {}}})",
    "`graph_options`",
)
# the twenty-fifth attack: the environment reached by other names, a variable of oneDNN's
# own, and a key computed by a method no constant folds
for how, line in {
    "putenv imported by name": "from os import putenv\nputenv('TF_XLA_FLAGS', '1')",
    "environ under another name": "import os\nenv = os.environ\nenv['TF_X'] = '0'",
    "environ imported by name": "from os import environ\nenviron['TF_X'] = '0'",
    "environ passed on": "import os\nprint(os.environ)",
    "unsetenv": "import os\nos.unsetenv('HOME')",
    "putenv kept": "import os\np = os.putenv\np('TF_X', '1')",
    "putenv in a partial": "import os, functools\nfunctools.partial(os.putenv, 'TF_X')('1')",
    "putenv by getattr": "import os\ngetattr(os, 'putenv')('TF_X', '1')",
    "putenv mapped": "import os\nlist(map(os.putenv, ['TF_X'], ['1']))",
    "environ to a mapping's method": "import os, collections.abc\n"
    "collections.abc.MutableMapping.update(os.environ, {'TF_X': '1'})",
    "environ as a default": "import os\nf = lambda e=os.environ: e.update(TF_X='1')",
    "environ looped over": "import os\nfor e in [os.environ]:\n    e['TF_X'] = '1'",
    # the twenty-sixth attack: os through another module's attribute
    "os through os.path": "import os\nf = [os.path.os.environ]",
    "os through shutil": "import shutil\np = shutil.os.putenv",
}.items():
    REFUSED[f"the environment reached by {how}"] = (line, "otherwise than by its items")
REFUSED["oneDNN's own variable set"] = (
    "import os\nos.environ['ONEDNN_MAX_CPU_ISA'] = 'SSE41'",
    "sets `ONEDNN_MAX_CPU_ISA`",
)
REFUSED["a session's rewriting by a key a method makes"] = (
    "c = tf.compat.v1.ConfigProto(**{'graph-options'.replace('-', '_'): {}})",
    "a key it computes",
)
REFUSED["a session's rewriting by a key a format makes"] = (
    "c = tf.compat.v1.ConfigProto(**{'{}_options'.format('graph'): {}})",
    "a key it computes",
)
REFUSED["oneDNN's variable set through another module's os"] = (
    "import shutil\nshutil.os.putenv('ONEDNN_MAX_CPU_ISA', 'SSE41')",
    "sets `ONEDNN_MAX_CPU_ISA`",
)
REFUSED["mixed precision by the optimizer's wrapper"] = (
    "opt = tf.compat.v1.mixed_precision.enable_mixed_precision_graph_rewrite(None)",
    "rewrites or compiles the graph",
)
REFUSED["keywords passed on, bound again inside"] = (
    "def f(**kw):\n    kw = {'graph-options'.replace('-', '_'): {}}\n"
    "    return tf.compat.v1.ConfigProto(**kw)",
    "a mapping it builds",
)
REFUSED["keywords from a mapping built"] = (
    "kw = {}\nc = tf.compat.v1.ConfigProto(**kw)",
    "a mapping it builds",
)
for how, line in {
    "an item": "import os\nos.environ['TF_XLA_FLAGS'] = '--tf_xla_auto_jit=2'",
    "an item in pieces": "import os\nos.environ['TF_' + 'XLA_FLAGS'] = '1'",
    "putenv": "import os\nos.putenv('TF_ENABLE_ONEDNN_OPTS', '1')",
    "setdefault": "import os\nos.environ.setdefault('TF_ENABLE_ONEDNN_OPTS', '1')",
    "update": "import os\nos.environ.update({'XLA_FLAGS': '1'})",
    "update by keyword": "import os\nos.environ.update(TF_XLA_FLAGS='1')",
}.items():
    REFUSED[f"TensorFlow's environment set by {how}"] = (line, "change how TensorFlow")
REFUSED["an environment's variable of a computed name"] = (
    "import os\nkey = 'TF'\nos.environ[key] = '1'",
    "does not name by a constant",
)

# the twenty-seventh attack: a ** dict's keys were checked for the rewriting names only, and
# np.load(..., **{"allow_pickle": True}) ran a pickle that set an attribute of an op the
# session already held (9/9 for a gradient ascent)
REFUSED["a pickle allowed by a ** dict's key"] = (
    "a = np.load('a.npy', **{'allow_pickle': True})",
    "sets `allow_pickle`, which runs code kept in data",
)
REFUSED["Keras' unsafe loading by a ** dict's key"] = (
    "import keras\nm = keras.models.load_model('m.keras', **{'safe_mode': False})",
    "sets `safe_mode`",
)
REFUSED["a namespace by a ** dict's key"] = (
    "import argparse\np = argparse.ArgumentParser()\nn = p.parse_args(**{'namespace': p})",
    "whose attributes are set by name",
)
REFUSED["TensorFlow's internals through the timeline module"] = (
    "from tensorflow.python.client import timeline\ntimeline.logging.set_verbosity(0)",
    "may use only Timeline",
)

# the twenty-eighth attack: a loader given its arguments out of sight of the rules ran a
# pickle (np.load(*[f, None, True]) scored a gradient ascent 9/9), or Keras' bytecode
VALUE_USE = "otherwise than by calling it"
for how, line in {
    "a * list": ("np.load(*['a.npy', None, True])", "more than its file by place"),
    "a * of a variable": ("args = ('a.npy', None, True)\nnp.load(*args)", "by place"),
    "an alias": ("ld = np.load\nld('a.npy', None, True)", VALUE_USE),
    "a partial": ("import functools\nfunctools.partial(np.load, 'a.npy', None, True)()", VALUE_USE),
    "map": ("list(map(np.load, ['a.npy'], [None], [True]))", VALUE_USE),
    "a thread's target": (
        "import threading\nthreading.Thread(target=np.load, kwargs={'allow_pickle': True})",
        VALUE_USE,
    ),
    "a list's item": ("[np.load][0]('a.npy', None, True)", VALUE_USE),
    "getattr": ("getattr(np, 'load')('a.npy', None, True)", VALUE_USE),
    "a name imported": ("from numpy import load\nf = load", VALUE_USE),
    "read_array by place": ("np.lib.format.read_array(open('a', 'rb'), True)", "by place"),
    "NpzFile by place": ("np.lib.npyio.NpzFile(open('a', 'rb'), False, True)", "by place"),
    "a helper's **kwargs": (
        "def h(**kw):\n    return np.load('a.npy', **kw)",
        "keywords it does not write out",
    ),
    "Keras' from_config by place": (
        "import keras\nkeras.layers.Lambda.from_config({}, None, False)",
        "by place",
    ),
    "Keras' deserializer by place": (
        "import keras\nkeras.saving.deserialize_keras_object({}, None, False)",
        "by place",
    ),
}.items():
    REFUSED[f"a loader of code kept in data by {how}"] = line


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_program_that_could_change_its_process_is_refused_with_its_line(case: str) -> None:
    body, word = REFUSED[case]
    source = f"import tensorflow as tf\nimport numpy as np\nimport abc\n{body}\n"
    why = check_source(source)
    assert why is not None, case
    assert word in why, why
    assert why.startswith("line "), why
    line = int(why.split(":")[0].removeprefix("line "))
    assert 4 <= line <= 3 + body.count("\n") + 1, why


#: what honest training programs write
HONEST = """
from __future__ import print_function

import abc
import argparse
import collections
import dataclasses
import enum
import os
import re
import sys
import threading
import time
from datetime import datetime

import numpy as np
from absl import flags
import tensorflow as tf
from six.moves import xrange
from tensorflow.python.client import timeline

tf.compat.v1.disable_eager_execution()
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
FLAGS = None


class _LoggerHook(tf.compat.v1.train.SessionRunHook):
    def __repr__(self):
        return self.__class__.__name__

    def begin(self):
        self._step = -1
        self._start_time = time.time()

    def before_run(self, run_context):
        self._step += 1
        return tf.compat.v1.train.SessionRunArgs(loss)


__all__ = ["main"]
__version__ = "1.0"


@dataclasses.dataclass
class Settings:
    rate: float = 0.1


class Base(abc.ABC):
    pass


class Mode(enum.Enum):
    TRAIN = 1


class Cfg(collections.namedtuple("Cfg", ["lr"])):
    LR = 0.1

    @classmethod
    def make(cls):
        return cls(lr=cls.LR)


class Net(tf.keras.Model):
    def __init__(self):
        super(Net, self).__init__()
        self.dense = tf.keras.layers.Dense(4)


class Scaled(tf.Module):
    def __init__(self):
        super().__init__()
        self.scale = tf.Variable(1.0)

    @tf.function
    def __call__(self, x):
        return x * self.scale

    @property
    def size(self):
        return self._size

    @size.setter
    def size(self, value):
        self._size = value


def twice(f):
    return lambda self, *args: f(self, *args)


size_of = lambda self: self.size  # noqa: E731


class Feeder(threading.Thread):
    def __init__(self, sess):
        super().__init__(daemon=True)
        self.sess = sess

    def run(self):
        while True:
            self.sess.run(enqueue)


def _variable_on_cpu(name, shape):
    with tf.device("/cpu:0"):
        return tf.compat.v1.get_variable(name, shape)


def main(_):
    pattern = re.compile("tower_[0-9]+")
    config = tf.compat.v1.ConfigProto(allow_soft_placement=True)
    config.gpu_options.allow_growth = True
    run_options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    run_metadata = tf.compat.v1.RunMetadata()
    feed = {}
    feed[x] = np.zeros([4, 2], dtype=np.float32)
    grads = [g for g, _ in opt.compute_gradients(loss)]
    print("%s: step %d" % (datetime.now(), 1), file=sys.stderr)
    value = getattr(FLAGS, "batch_size", 32)
    with tf.compat.v1.Session(config=config) as sess:
        out = sess.run(train_op, feed_dict=feed, options=run_options, run_metadata=run_metadata)
        trace = timeline.Timeline(step_stats=run_metadata.step_stats)
        accuracy = tf.reduce_mean(x).eval(session=sess)
        rate.load(0.05, sess)
        data = np.load("data.npz", allow_pickle=False)
    if type(grads) == list:
        print(type(grads), tf.__version__, __version__)
    print(Mode.TRAIN, Cfg.make(), Cfg.LR)
    for i in xrange(3):
        try:
            sess.run(train_op)
        except tf.errors.OutOfRangeError as error:
            print(type(error).__name__)


def settings():
    parsed = argparse.ArgumentParser().parse_args()
    parsed.lr = 0.1
    flags.FLAGS.batch_size = 64
    cfg = Cfg(lr=parsed.lr)._replace(lr=0.2)
    return cfg._asdict(), cfg._fields


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    FLAGS, unparsed = parser.parse_known_args()
    tf.compat.v1.app.run(main=main, argv=[sys.argv[0]] + unparsed)
"""


def test_the_programs_people_write_pass() -> None:
    assert check_source(HONEST) is None
    quiet = "import os\nos.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'\n"
    devices = "import os\nos.environ.setdefault('CUDA_VISIBLE_DEVICES', '0')\n"
    reads = "home = os.environ.get('HOME')\nsays = 'HOME' in os.environ\n"
    # unset (TensorFlow's defaults again), copied (the twenty-sixth attack's honest forms)
    reads += "os.environ.pop('TF_CONFIG', None)\nenv = dict(os.environ, A='0')\n"
    # keywords passed on by a helper, each of its calls checked
    reads += "def var(name, **kwargs):\n    return tf.compat.v1.get_variable(name, **kwargs)\n"
    reads += "info = {'step': 1}\nsaid = 'step {step}'.format(**info)\n"
    written = "c = tf.compat.v1.ConfigProto(**{'allow_soft_placement': True})\n"
    written += "d = np.load('d.npy', **{'allow_pickle': False})\n"
    written += "from tensorflow.python.client import timeline\n"
    written += "trace = timeline.Timeline(None).generate_chrome_trace_format()\n"
    assert check_source(quiet + devices + reads + "import tensorflow as tf\n" + written) is None


@pytest.mark.parametrize(
    "path",
    [
        *sorted((ROOT / "assignments" / "04-your-tensorflow-towers").rglob("*.py")),
        *sorted(
            p
            for p in (ROOT / "tests" / "fixtures" / "programs").glob("*.py")
            # not Python; its own module; free ports found with `socket` (no graded program)
            if p.name not in ("bad_syntax.py", "towers_argv.py", "tf2_parameter_server.py")
        ),
    ],
    ids=lambda p: p.name,
)
def test_the_given_programs_pass(path: Path) -> None:
    assert check_program(path, path.name) is None


def test_a_file_that_is_not_python_or_too_large_gets_one_line(tmp_path: Path) -> None:
    program = tmp_path / "train.py"
    program.write_bytes(b"x = (\n")
    assert "train.py: line 1: not Python" in str(check_program(program, "train.py"))
    program.write_bytes(b"x = 1\0\n")
    assert "not Python" in str(check_program(program, "train.py"))
    program.write_text("x = " + "(" * 5000 + ")" * 5000 + "\n")
    assert "train.py: " in str(check_program(program, "train.py"))
    program.write_bytes(b"#" * (MOST_BYTES + 1))
    assert "more than 1 MiB" in str(check_program(program, "train.py"))
    # the 27th attack: 1 MiB of `a < a < ...` took 14 s of the grader's own time
    program.write_text("a = 1\nb = " + " < ".join(["a"] * 250_000) + "\n")
    assert "more than 100,000 parts of Python" in str(check_program(program, "train.py"))
    assert "cannot be read" in str(check_program(tmp_path / "none.py", "none.py"))


def test_deep_nesting_is_no_crash() -> None:
    nested = "x = " + "[" * 100 + "]" * 100
    assert check_source(textwrap.dedent(nested)) is None or "nested" in str(check_source(nested))
