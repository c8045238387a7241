"""A graded program's source keeps to TensorFlow's public API: what would change the process
that exports its graph (TensorFlow's code, Python's, the grader's) is refused before it runs,
and the programs people write pass."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from simsync.grading.resolver import resolve
from simsync.grading.source import (
    GUARDED,
    GUARDED_CLASSES,
    MODULES,
    MOST_BYTES,
    YET_TOPS,
    check_program,
    check_source,
    program_paths,
)

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
# a name bound once to a module's path is read as that path (the thirty-fourth attack):
# what it reaches is refused as itself
REFUSED["the environment reached by environ under another name"] = (
    "import os\nenv = os.environ\nenv['TF_X'] = '0'",
    "a variable of the environment",
)
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

# the twenty-ninth attack: np.load under numpy.matlib's name ran a pickle, and an object made
# with an __array_interface__ had numpy read and write memory at any address (a function's
# code swapped for another's: a gradient ascent graded 9/9)
MACHINERY = "a part of Python's machinery"
for how, line in {
    "numpy.matlib imported": ("import numpy.matlib\nnumpy.matlib.load('a', None, True)", "matlib"),
    "numpy.matlib reached": ("np.matlib.load('a.npy', None, True)", "matlib"),
    "a keyword": (
        "import argparse\nview = argparse.Namespace(__array_interface__={'data': (8, False)})",
        MACHINERY,
    ),
    "a ** dict's key": (
        "import argparse\nargparse.Namespace(**{'__array_struct__': 1})",
        MACHINERY,
    ),
    "a string": ("interface = {'__array_interface__': {}}", MACHINERY),
    "a string in pieces": ("name = '__array' + '_interface__'", MACHINERY),
}.items():
    REFUSED[f"numpy's memory by {how}"] = line
TAKEN_APART = "in a class pattern"
REFUSED["a loader bound by a class pattern"] = (
    "match np:\n    case object(load=ld):\n        ld('a.npy', None, True)",
    TAKEN_APART,
)
REFUSED["the environment bound by a class pattern"] = (
    "import os\nmatch os:\n    case object(environ=env):\n        env['TF_XLA_FLAGS'] = '1'",
    TAKEN_APART,
)
REFUSED["a class pattern's positional attributes"] = (
    "match np:\n    case np.ndarray(shape):\n        pass",
    TAKEN_APART,
)
# ... and names made at run time, which become attributes: one could be __array_interface__
COMPUTED = "a name it computes, or one of Python's machinery"
for how, line in {
    "an option's dest": (
        "import argparse\nargparse.ArgumentParser().add_argument('--x', dest=n)",
        COMPUTED,
    ),
    "an option's name": (
        "import argparse\nargparse.ArgumentParser().add_argument('--__x__')",
        COMPUTED,
    ),
    "an option's prefix": (
        "import argparse\nargparse.ArgumentParser(prefix_chars='+')",
        "prefix_chars",
    ),
    "an absl flag's name": (
        "from absl import flags\nflags.DEFINE_string(n, 'a', 'help')",
        COMPUTED,
    ),
    "an absl flag made whole": (
        "from absl import flags\nflags.DEFINE(p, n, 1, 'help')",
        "out of sight",
    ),
    "an enum made by a call": ("import enum\nE = enum.Enum('E', {n: 1})", "an enum of names"),
    "a log record's dict": ("import logging\nlogging.makeLogRecord({n: 1})", "machinery"),
    "a dataclass made by a call": (
        "import dataclasses\ndataclasses.make_dataclass('A', [n])",
        "machinery",
    ),
    "a metaclass called": ("abc.ABCMeta('A', (), {n: 1})", "machinery"),
    "Keras' config of attributes": ("import keras\nc = keras.utils.Config()", "machinery"),
    "a function's class another module holds": (
        "import dataclasses\ndataclasses.FunctionType",
        "machinery",
    ),
    "a method's class another module holds": (
        "import contextlib\ncontextlib.MethodType",
        "machinery",
    ),
    "a string multiplied": ("name = '_' * 2 + 'array_interface' + '_' * 2", MACHINERY),
}.items():
    REFUSED[f"an attribute named at run time by {how}"] = line
for how, line in {
    "an argument": "import os\ndef helper(os):\n    return os",
    "an assignment": "import os\nif False:\n    os = None",
    "a loop": "for np in []:\n    pass",
}.items():
    REFUSED[f"a module's name bound again by {how}"] = (line, "the name of a module it imports")

# the thirtieth attack: the same makers under other names, or given a name by another way
NAMED = "U = '_'\nNAME = U + U + 'array_interface' + U + U\n"
for how, line in {
    "a log record's maker": (
        "import logging\nlogging.getLogger('w').makeRecord("
        "'w', 20, 'f', 1, 'm', None, None, extra={NAME: 1})",
        COMPUTED,
    ),
    "a log call's extra": (
        "import logging\nlogging.getLogger('w').warning('m', extra={NAME: 1})",
        COMPUTED,
    ),
    "a log call's extra built": (
        "import logging\nlogging.getLogger('w').warning('m', extra=dict(a=1))",
        "builds",
    ),
    "a log adapter": (
        "import logging\nlogging.LoggerAdapter(logging.getLogger('w'), {NAME: 1})",
        "machinery",
    ),
    "an enum class aliased": ("import enum\nE = enum.Enum\nE('C', {NAME: 1})", "class's base"),
    "an enum class in a list": ("import enum\n[enum.Enum][0]('C', {NAME: 1})", "class's base"),
    "an enum class of its own, empty": (
        "import enum\nclass E(enum.Enum):\n    pass\nE('C', {NAME: 1})",
        "an enum of names",
    ),
    "an option's maker aliased": (
        "import argparse\nadd = argparse.ArgumentParser().add_argument\nadd('--x', dest=NAME)",
        "otherwise than by calling",
    ),
    "a subparser's dest": (
        "import argparse\nargparse.ArgumentParser().add_subparsers(dest=NAME)",
        COMPUTED,
    ),
    "the flags aliased, an item set": (
        "from absl import flags\nF = flags.FLAGS\nF[NAME] = F['lr']",
        "a part of a module",
    ),
    "the flags passed on": (
        "from absl import flags\ndef reg(fv, n):\n    return fv\nreg(flags.FLAGS, NAME)",
        "otherwise than by their attributes",
    ),
    "a flag's maker aliased": (
        "from absl import flags\nD = flags.DEFINE_string\nD(NAME, 'a', 'h')",
        "otherwise than by calling",
    ),
    "flags of its own": ("from absl import flags\nfv = flags.FlagValues()", "machinery"),
}.items():
    REFUSED[f"an attribute named at run time by {how}"] = (NAMED + line[0], line[1])
# the thirty-first attack: operator's getter under pathlib's name, and a format built at
# run time whose fields walked a closure to the key that seals the answers
REFUSED.update(
    {
        "operator's attrgetter under another module's name": (
            "import pathlib\nget = pathlib.attrgetter('x')",
            "`pathlib.attrgetter`",
        ),
        "operator's attrgetter imported from another module": (
            "from pathlib import attrgetter",
            "`pathlib.attrgetter`",
        ),
        "a format built at run time": (
            "U = '_' * 2\npath = '.' + U + 'closure' + U\nsaid = ('{0' + path + '}').format(f)",
            "does not write out",
        ),
        "a format passed in": ("def show(fmt, x):\n    return fmt.format(x)", "does not write out"),
        "a format's field that reads an attribute": (
            "said = '{0.__class__}'.format(tf)",
            "reads an attribute",
        ),
        "a format named, whose field reads an attribute": (
            "F = '{x.graph}'\nsaid = F.format_map({'x': tf})",
            "reads an attribute",
        ),
        # the thirty-second attack: a format's method taken as a value, the debugger
        "a format's method as a value": ("fill = '{0.x}'.format\nfill(tf)", "otherwise than"),
        "a format's method as a key": ("max([tf], key='{0.x}'.format)", "otherwise than"),
        "str's own format, mapped": ("list(map(str.format, ['{0.x}'], [tf]))", "`str.format`"),
        "a format added to in pieces": ("m = '{0'\nm += '.x}'\nsaid = m.format(tf)", "reads"),
        "a format chosen": ("said = ('{0.x}' if tf else '{}').format(tf)", "reads"),
        "a format's name bound to a class too": (
            "text = '{}'\nclass text:\n    pass\nsaid = text.format(tf)",
            "does not write out",
        ),
        "the debugger's hook": ("import sys\nsys.breakpointhook()", "`sys.breakpointhook`"),
        "absl's debugger flag": (
            "from absl import flags\nflags.FLAGS.run_with_pdb = True",
            "run_with_pdb",
        ),
        "logging's brace style by place": (
            "import logging\nlogging.Formatter(fmt, None, '{')",
            "does not write out",
        ),
        "logging's brace style in a ** dict": (
            "import logging\nlogging.basicConfig(**{'format': fmt, 'style': '{'})",
            "does not write out",
        ),
        "logging's style by a name": (
            "import logging\nbrace = '{'\nlogging.Formatter(fmt, style=brace)",
            "does not write out",
        ),
        "logging's arguments starred": (
            "import logging\nlogging.Formatter(*[fmt, None, '{'])",
            "out of sight",
        ),
        "absl's debugger flag in an argv": (
            "from absl import app\napp.run(main, argv=['p', '--run_with_pdb'])",
            "debugger flag",
        ),
        "a string annotation evaluated": (
            "import functools\n@functools.singledispatch\ndef show(x):\n    pass",
            "`functools.singledispatch`",
        ),
        "a parser's namespace by place, intermixed": (
            "import argparse, json\nargparse.ArgumentParser().parse_intermixed_args([], json)",
            "namespace",
        ),
        "a parser's namespace starred": (
            "import argparse, json\nargparse.ArgumentParser().parse_args(*[[], json])",
            "namespace",
        ),
        "dataclass called on another module's class": (
            "import dataclasses, json\ndataclasses.dataclass(json.JSONEncoder)",
            "decorate a class of its own",
        ),
        "total_ordering on another module's class": (
            "import functools, numbers\nfunctools.total_ordering(numbers.Real)",
            "`functools.total_ordering`",
        ),
        "type of a class, handed out": ("meta = type(int)", "`type(x)`"),
        "an object's class handed out": (
            "class P:\n    def apply(self, m):\n        self.x = 1\nkind = type(P())",
            "`type(x)`",
        ),
        "absl's flags under app's name": (
            "from absl import app\nvalues = app.FLAGS\nvalues['x'] = 1",
            "a part of a module",
        ),
        "absl's Flag made by hand": (
            "from absl import flags\nf = flags.Flag(None, None, n, 'x', 'h')",
            "`flags.Flag`",
        ),
        "a process pool": (
            "from concurrent.futures import ProcessPoolExecutor",
            "ProcessPoolExecutor",
        ),
        "a module marked by no_type_check": (
            "import typing, json\ntyping.no_type_check(json)",
            "no_type_check",
        ),
        "the display hook": ("import sys, json\nsys.displayhook(json)", "`sys.displayhook`"),
        "isinstance bound again to hand a class out": (
            "class P:\n    def f(self):\n        return 1\n"
            "def isinstance(v, k):\n    return k\nisinstance(None, P).f()",
            "class `P`",
        ),
        "a class's slots that are Python's machinery": (
            "class C:\n    __slots__ = ('__dict__',)",
            "`__slots__`",
        ),
        "a format in a field's own format": (
            "said = '{0:{1.x}}'.format(1, tf)",
            "reads an attribute",
        ),
        "logging's brace style, an attribute in a field": (
            "import logging\nlogging.basicConfig(format='{args.x}', style='{')",
            "reads an attribute",
        ),
        "logging's brace style, its format made": (
            "import logging\nf = input()\nlogging.Formatter(f, style='{')",
            "does not write out",
        ),
    }
)
REFUSED["native code as a file system"] = (
    "tf.compat.v1.load_file_system_library('fs.so')",
    "native code",
)
REFUSED.update(
    {  # a review of the rules that refuse names computed at run time: their ways round
        "an option's dest by a ** dict's key": (
            "import argparse\nn = input()\n"
            "argparse.ArgumentParser().add_argument('--x', **{'dest': n})",
            "a name it computes",
        ),
        "a flag's name by a ** dict's key": (
            "from absl import flags\nn = input()\n"
            "flags.DEFINE_string(**{'name': n, 'default': None, 'help': 'h'})",
            "a name it computes",
        ),
        "a record's extra by a ** dict's key": (
            "import logging\nd = {input(): 1}\nlogging.info('m', **{'extra': d})",
            "`extra` a mapping it builds",
        ),
        "an option's keywords passed on": (
            "import argparse\np = argparse.ArgumentParser()\n"
            "def add(**kw):\n    p.add_argument('--x', **kw)\nadd(dest=input())",
            "keywords it does not write out",
        ),
        "the flags under a second name": (
            "from absl import flags\nFLAGS = flags.FLAGS\nG = FLAGS\nG[input()] = G['lr']",
            "a part of a module",
        ),
        "logging's formatter under another name": (
            "import logging\nF = logging.Formatter\nF(input(), None, '{')",
            "otherwise than by calling it",
        ),
    }
)

REFUSED.update(
    {  # the thirty-second attack: numpy's arrays of objects over bytes the program wrote are
        # any object at any address (it read the answer's key so)
        "an array of objects over a buffer": (
            "np.ndarray((1,), dtype=object, buffer=bytearray(8))",
            "memory it is handed",
        ),
        "the array class under another name": (
            "A = np.ndarray\nA((1,), object, bytearray(8))",
            "memory it is handed",
        ),
        "the array class imported by name": (
            "from numpy import ndarray\nndarray((1,), object, b'x' * 8)",
            "memory it is handed",
        ),
        "the array class by getattr": (
            "getattr(np, 'ndarray')((1,), object, b'x' * 8)",
            "memory it is handed",
        ),
        "the array class passed on": (
            "list(map(np.ndarray, [(1,)]))",
            "memory it is handed",
        ),
        "records from bytes": (
            "np.rec.fromstring(b'x' * 8, dtype=[('a', 'O')])",
            "memory it is handed",
        ),
        "records' module imported by name": (
            "from numpy import rec\nrec.array(b'x' * 8, dtype=[('a', 'O')])",
            "memory it is handed",
        ),
        "a record array over a buffer": (
            "np.recarray((1,), dtype=[('a', 'O')], buf=b'x' * 8)",
            "memory it is handed",
        ),
        "a file mapped as objects": ("np.memmap('f', dtype=object)", "memory it is handed"),
        "records by numpy's old internals": (
            "np.core.records.fromstring(b'x' * 8)",
            "memory it is handed",
        ),
        "a file mapped by the format module": (
            "np.lib.format.open_memmap('f', mode='w+', dtype=object, shape=(1,))",
            "memory it is handed",
        ),
    }
)

REFUSED.update(
    {  # what the honest idioms let through stays refused beside them
        "traceback's frames": ("import traceback\ntraceback.walk_stack(None)", "may use only"),
        "traceback's frames imported by name": (
            "from traceback import walk_stack\nwalk_stack(None)",
            "imports `traceback.walk_stack`",
        ),
        "traceback's module under another name": (
            "import traceback\nt = traceback\nt.walk_stack(None)",
            "otherwise than by its names",
        ),
        "the timeline's module handed to a function": (
            "from tensorflow.python.client import timeline\n"
            "def f(m):\n    return m.logging\nf(timeline)",
            "otherwise than by its names",
        ),
        "vars kept": ("d = vars(tf)", "uses `vars`"),
        "vars read in a print": ("print(vars(tf)['compat'])", "uses `vars`"),
        "vars handed to json": ("import json\njson.dumps(vars(tf), default=repr)", "uses `vars`"),
        "type as a value": ("t = type\nt('X', (), {})", "uses `type`"),
        "a format reading an attribute kept": ("f = '{0.x}'.format\nf(tf)", "by calling it"),
    }
)


def test_numpy_arrays_class_stays_usable_as_a_type() -> None:
    """Refused when called or passed on, numpy's array class is still a type to test a value
    against and to name in a type hint."""
    source = (
        "import typing\nimport numpy as np\n"
        "def f(x: np.ndarray, y: typing.Optional[np.ndarray] = None) -> np.ndarray | None:\n"
        "    a: np.ndarray = np.zeros(2)\n"
        "    return x if isinstance(x, (np.ndarray, list)) else a\n"
    )
    assert check_source(source) is None


def test_the_environment_is_not_set_past_its_rules_by_a_module_name_bound_again() -> None:
    """The twenty-ninth attack's F6: with ``os`` bound again in a helper, ``os.environ`` was
    no longer the environment to the rules, and ``TF_XLA_FLAGS`` was set."""
    source = "import os\ndef helper(os):\n    return os\nos.environ.update(TF_XLA_FLAGS='1')\n"
    assert check_source(source) is not None


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
import traceback
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
    print(vars(parsed), f"{vars(parsed)}")  # the thirty-second attack's honest idioms
    row = "{:>8} {:>8}".format
    print(row(1, 2), isinstance(parsed, type))
    try:
        parsed.lr = 0.1
    except AttributeError:
        traceback.print_exc()
        print(traceback.format_exc())
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
    # an enum of its own, a log record's extra keys written out, flags by their attributes
    kept = "import enum, logging\nclass Mode(enum.Enum):\n    SYNC = 1\nmode = Mode(1)\n"
    kept += "logging.getLogger('train').info('step', extra={'step': 1})\n"
    kept += "FLAGS = tf.compat.v1.flags.FLAGS\ntf.compat.v1.flags.DEFINE_integer('gpus', 2, 'n')\n"
    kept += "FLAGS.gpus = 4\ntowers = FLAGS.gpus\nFLAGS(['train.py'])\n"
    assert check_source("import tensorflow as tf\n" + kept) is None
    # a helper's honest census of the rules' false refusals: how many GPUs by device_lib,
    # the GPUs' order and memory growth, the hash seed of a run made repeatable
    gpus = "from tensorflow.python.client import device_lib\n"
    gpus += "n = len([d for d in device_lib.list_local_devices() if d.device_type == 'GPU'])\n"
    gpus += "import os\nos.environ['CUDA_DEVICE_ORDER'] = 'PCI_BUS_ID'\n"
    gpus += "os.environ['TF_FORCE_GPU_ALLOW_GROWTH'] = 'true'\nos.environ['PYTHONHASHSEED'] = '0'\n"
    assert check_source(gpus) is None
    # a name of its own that begins as absl's makers of flags do
    assert check_source("DEFINED = True\nLIMIT = DEFINED and 5\n") is None
    assert "internals" in (check_source(gpus + "device_lib.pywrap_tf_session\n") or "")
    # formats written out, or bound to a name alone; a module's own format (TensorFlow's)
    formats = "F = 'step {step}: loss {loss:.3f}'\nsaid = F.format(step=1, loss=2.0)\n"
    formats += "said = '{} {:>{width}}'.format(1, 2, width=8) + '{0[1]}'.format([1, 2])\n"
    formats += "import logging\nlogging.basicConfig(format='{asctime} {message}', style='{')\n"
    formats += "text = tf.strings.format('loss {}', [tf.constant(1.0)])\n"
    # the thirty-second attack's honest formats: annotated, repeated, chosen, added to
    formats += "FMT: str = '{} {:.3f}'\nsaid = FMT.format(1, 2.0)\ncols = [1, 2]\n"
    formats += "said = ('{:>10}' * len(cols)).format(*cols)\nprecise = True\n"
    formats += "said = ('{:.6f}' if precise else '{:.2f}').format(1.0)\n"
    formats += "msg = 'step {step}'\nmsg += ' loss {loss:.3f}'\nsaid = msg.format(step=1, loss=2)\n"
    formats += "stamp = logging.Formatter(None, '%H:%M', style='{')\n"
    formats += "plain = logging.Formatter('%(message)s', '%H:%M')\n"
    formats += "logging.basicConfig(level=logging.INFO, format='%(asctime)s %(message)s')\n"
    formats += "x = 1\nprint(type(x), f'{type(x)}', type(x) == int, type(x).__name__)\n"
    assert check_source("import tensorflow as tf\n" + formats) is None
    # the thirty-first attack's honest forms: a dataclass decorated by its short name, its
    # own classes as type hints, an exception class caught and raised, an enum's members
    own = "from dataclasses import dataclass\nfrom functools import cached_property\n"
    own += "@dataclass\nclass Config:\n    lr: float = 0.1\n"
    own += "    @cached_property\n    def steps(self) -> int:\n        self.seen = True\n"
    own += "        return 10\n"
    own += "def train(cfg: Config) -> 'Config | None':\n    return cfg\n"
    own += "class Stop(Exception):\n    pass\ntry:\n    train(Config())\nexcept Stop:\n"
    own += "    raise Stop\nimport enum\nclass Mode(enum.Enum):\n    SYNC = 1\n"
    own += "names = [m.name for m in Mode] + [Mode['SYNC'].name] + [str(len(Mode))]\n"
    own += "@dataclass\nclass Run:\n    steps: int = 1\n    def __post_init__(self):\n"
    own += "        self.half = self.steps // 2\nclass Point:\n    __slots__ = ('x', 'y')\n"
    assert check_source(own) is None


#: the thirty-third attack: what the rules refuse under one path, reached under another (a
#: module held by another module, an object re-exported, a class handed back as data)
ALIASED = {
    "numpy held by numpy.ma.core": (
        "np.ma.core.np.ndarray((1,), object, b'x' * 8)",
        "memory it is handed",
    ),
    "numpy's loader held by numpy.random.mtrand": (
        "np.random.mtrand.np.load('p.bin', None, True)",
        "passes `load` more than its file",
    ),
    "logging held by logging.handlers": (
        "import logging.handlers\nlogging.handlers.logging.Formatter('{x}', None, '{')",
        "module `logging` held by another module",
    ),
    "enum held by re": ("import re\nre.enum.Enum('H', {input(): 1})", "names given as data"),
    "numpy held by numpy.ma.core, kept": ("N = np.ma.core.np", "module `numpy` held by"),
    "re held by json.decoder": ("import json.decoder\njson.decoder.re.compile('x')", "`re`"),
    "numpy's internals held by numpy.ma.core": ("np.ma.core.umath.add(1, 2)", "held by"),
    "numpy imported from another module": (
        "from numpy.ma.core import np as N\nN.zeros(1)",
        "held by another module",
    ),
    "the array class re-exported": (
        "np.ma.core.ndarray((1,), object, b'x' * 8)",
        "memory it is handed",
    ),
    "the array class imported from another module": (
        "from numpy.ma.core import ndarray\nndarray((1,), object, b'x' * 8)",
        "memory it is handed",
    ),
    "the array class behind a type hint": (
        "import numpy.typing\nnp.typing.NDArray((1,), object, b'x' * 8)",
        "memory it is handed",
    ),
    "a masked array's class": ("np.ma.array([1]).baseclass((1,))", "`np.ma.array([1]).baseclass`"),
    "a type hint's class": ("import typing\ntyping.get_origin(int)", "get_origin"),
    "a dataclass field's hinted type": ("import dataclasses\ndataclasses.fields(1)", "fields"),
}
ALIASED.update(
    {  # the thirty-fourth attack: a module kept in a variable, or handed on as a value
        "a module kept in a variable": (
            "m = np.ma.core\nm.np.load('p.bin', None, True)",
            "passes `load` more than its file",
        ),
        "a module kept in a variable, numpy through it": (
            "m = np.ma.core\nn = m.np",
            "module `numpy` held by another module",
        ),
        "numpy kept in a variable": ("n = np\nn.load('p.bin', None, True)", "`load`"),
        "a module kept as a class's attribute": (
            "class Holder:\n    mod = np.ma.core\nHolder.mod.np.load('p.bin', None, True)",
            "as a value",
        ),
        "numpy in a list": ("[np][0].load('p.bin', None, True)", "as a value"),
        "os kept in a variable": ("import os\no = os\no.environ['TF_XLA_FLAGS'] = '1'", "`TF_XLA"),
        "logging kept in a variable": (
            "import logging\nlg = logging\nlg.Formatter(input(), None, '{')",
            "a format it does not write out",
        ),
        "absl's formatter, logging's by another class": (
            "from absl import logging\nlogging.PythonFormatter(input(), None, '{')",
            "a format it does not write out",
        ),
        "numpy's masked records over a buffer": (
            "import numpy.ma.mrecords\n"
            "np.ma.mrecords.MaskedRecords((1,), [('a', 'O')], buf=b'x' * 8)",
            "memory it is handed",
        ),
    }
)
#: ... and honest ways to the same modules and objects, which pass
ALIASED_HONEST = (
    "import os\nprint(os.path.join('a', 'b'))\n"
    "import numpy.typing as npt\ndef f(x: npt.NDArray[np.float32]) -> npt.NDArray:\n"
    "    return x\n"
    "import traceback\nfrom traceback import format_exc\nprint(format_exc())\n"
    "from tensorflow.python.client.timeline import Timeline\nprint(Timeline)\n"
    "print(tf.keras.layers.Dense(1), tf.nn.relu, tf.compat.v1.train.AdamOptimizer)\n"
    "layers = tf.keras.layers\nprint(layers.Dense(2))\n"
)
PREFIX = "import tensorflow as tf\nimport numpy as np\nimport abc\n"


@pytest.fixture(scope="module")
def aliased_names() -> dict:
    """What the names of every case of :data:`ALIASED` (and the honest ones) are, read off
    the modules in one process."""
    paths: set[str] = set()
    imports: set[str] = set()
    for source in [PREFIX + body for body, _ in ALIASED.values()] + [PREFIX + ALIASED_HONEST]:
        found, imported = program_paths(source)
        paths, imports = paths | found, imports | imported
    return resolve(paths, GUARDED, MODULES | YET_TOPS, imports, GUARDED_CLASSES)


@pytest.mark.parametrize("case", sorted(ALIASED))
def test_what_the_rules_refuse_is_refused_under_any_path(case: str, aliased_names: dict) -> None:
    body, word = ALIASED[case]
    why = check_source(PREFIX + body + "\n", aliased_names)
    assert why is not None and word in why, why
    line = int(why.split(":")[0].removeprefix("line "))
    assert 4 <= line <= 3 + body.count("\n") + 1, why


def test_the_public_apis_own_paths_and_names_pass(aliased_names: dict) -> None:
    assert check_source(PREFIX + ALIASED_HONEST, aliased_names) is None


#: the programs given with simsync, which a graded program may be like
GIVEN = [
    *sorted((ROOT / "assignments" / "04-your-tensorflow-towers").rglob("*.py")),
    *sorted(
        p
        for p in (ROOT / "tests" / "fixtures" / "programs").glob("*.py")
        # not Python; its own module; free ports found, or its interfaces listed, with
        # `socket` (no graded program)
        if p.name
        not in (
            "bad_syntax.py",
            "towers_argv.py",
            "tf2_parameter_server.py",
            "between_graph.py",
        )
    ),
]


@pytest.fixture(scope="module")
def given_names() -> dict:
    """What the names of every given program are, read off the modules in one process."""
    paths: set[str] = set()
    imports: set[str] = set()
    for path in GIVEN:
        found, imported = program_paths(path.read_bytes())
        paths, imports = paths | found, imports | imported
    return resolve(paths, GUARDED, MODULES | YET_TOPS, imports, GUARDED_CLASSES)


@pytest.mark.parametrize("path", GIVEN, ids=lambda p: p.name)
def test_the_given_programs_pass(path: Path, given_names: dict) -> None:
    assert check_source(path.read_bytes(), given_names) is None


def test_a_program_is_checked_by_what_its_names_are() -> None:
    """check_program reads what the names are in a process of its own: the solution passes,
    and numpy reached through another module is refused though its source reads well."""
    solution = ROOT / "assignments" / "04-your-tensorflow-towers" / "solution" / "train.py"
    assert check_program(solution, "train.py") is None
    aliased = solution.parent.parent / "aliased.py"
    source = "import numpy as np\nprint(np.ma.core.np.zeros(1))\n"
    assert check_source(source) is None
    try:
        aliased.write_text(source)
        why = str(check_program(aliased, "aliased.py"))
    finally:
        aliased.unlink()
    assert why.startswith("aliased.py: line 2: ") and "held by another module" in why


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


def test_no_standard_module_a_program_may_import_holds_a_getter_by_name_unrefused() -> None:
    """Python's functions that reach an attribute, a name's object or code by a name given
    as data, under whichever name a standard module a program may import holds them (the
    thirty-first attack's ``pathlib.attrgetter``, which is ``operator.attrgetter``): each
    such name is refused wherever it is an attribute."""
    import builtins
    import functools
    import importlib
    import operator
    import pkgutil
    import sys

    from simsync.grading.source import MODULES, NOT_ATTRIBUTES, NOT_MODULES

    reaching = [operator.attrgetter, operator.methodcaller, functools.update_wrapper]
    reaching += [getattr(builtins, n) for n in ("getattr", "setattr", "delattr", "exec", "eval")]
    reaching += [builtins.compile, builtins.globals, builtins.vars, builtins.__import__]
    reaching += [importlib.import_module]
    names = [m for m in MODULES if m in sys.stdlib_module_names]
    for name in list(names):
        module = importlib.import_module(name)
        for info in pkgutil.walk_packages(getattr(module, "__path__", []), f"{name}."):
            if not info.name.startswith(NOT_MODULES) and ".test" not in info.name:
                names.append(info.name)
    unrefused = []
    for name in names:
        try:
            module = importlib.import_module(name)
        except Exception:  # a module this machine cannot load (a missing library)
            continue
        for attribute in dir(module):
            value = getattr(module, attribute, None)
            if any(value is found for found in reaching) and attribute not in NOT_ATTRIBUTES:
                unrefused.append(f"{name}.{attribute}")
    assert not unrefused


def test_an_object_set_under_a_name_also_bound_otherwise_says_which_line() -> None:
    """A parser's namespace whose name another function's ``*args`` also binds cannot be told
    from it by the rules (a helper's census of false refusals): the refusal names the line
    of the other binding, so the student knows what to rename."""
    source = (
        "import argparse\ndef log(msg, *args):\n    print(msg % args)\n"
        "args = argparse.ArgumentParser().parse_args()\nargs.lr = 0.1\n"
    )
    why = check_source(source) or ""
    assert why.startswith("line 5: sets `args.lr`") and "too (line 2)" in why, why
    assert check_source(source.replace("*args", "*values").replace("% args", "% values")) is None
    assert "too (line" not in (check_source("import json\nx = json.loads('{}')\nx.y = 1\n") or "")


def test_the_resolver_imports_nothing_a_program_did_not_and_reads_every_name() -> None:
    """The thirty-fourth attack had the resolver import ``tf.tools.pip_package.setup``, which
    ran TensorFlow's setup.py and a file of the folder it ran in; and hid its own names past
    the 20,000th, which were never read. A submodule is read only where the program imports
    it, and more names than that are refused, not cut."""
    assert resolve(["logging.handlers"], [], ["logging"]) == {"logging.handlers": {}}
    imported = resolve(["logging.handlers"], [], ["logging"], ["logging.handlers"])
    assert imported == {"logging.handlers": {"module": "logging.handlers"}}
    many = [f"numpy.a{i}" for i in range(20_001)]
    with pytest.raises(RuntimeError, match="20,001 paths"):
        resolve(many, [], ["numpy"])
