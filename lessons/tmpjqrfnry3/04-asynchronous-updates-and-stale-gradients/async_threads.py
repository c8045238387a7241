# A well-known Stack Overflow answer ("Asynchronous computation in TensorFlow": run several
# sess.run(train_op) threads at once), multi-GPU variant in TensorFlow 1.x style, written for
# this lesson: one train op per GPU, one Python thread per train op, all threads on ONE
# session. `tower_loss` (at the bottom) stands in for a real model on random data.
# A complete program: `simsync simulate async_threads.py` imports the graph it builds.
import argparse
import itertools
import threading

import tensorflow.compat.v1 as tf

tf.disable_eager_execution()                     # TensorFlow 1.x behaviour under TF 2


def train(num_gpus, max_steps):
    train_ops = []
    for i in range(num_gpus):
        with tf.device("/gpu:%d" % i):
            loss = tower_loss(i)  # reads the shared variables (/cpu:0)
            opt = tf.train.GradientDescentOptimizer(0.1)
            train_ops.append(opt.minimize(loss))

    sess = tf.Session(config=tf.ConfigProto(allow_soft_placement=True))
    sess.run(tf.global_variables_initializer())

    # One pool of updates for all threads (the answer's threads loop forever).
    updates = itertools.count()

    def train_function(train_op):
        while next(updates) < max_steps:
            sess.run(train_op)  # read, forward, backward, apply

    threads = [threading.Thread(target=train_function, args=(op,))
               for op in train_ops]
    for t in threads:
        t.start()  # nothing coordinates the threads but the variables
    for t in threads:
        t.join()


# ---- the stand-in: a small model, its variables on /cpu:0, trained on random data --------
FEATURES, CLASSES, BATCH = 64, 10, 32


def tower_loss(i):
    """Tower i's loss: two dense layers whose variables every tower shares."""
    images = tf.random.normal([BATCH, FEATURES], name="images_%d" % i)
    labels = tf.random.uniform([BATCH], 0, CLASSES, dtype=tf.int32, name="labels_%d" % i)
    with tf.variable_scope("model", reuse=tf.AUTO_REUSE):
        hidden = _dense(images, 128, "hidden", tf.nn.relu)
        logits = _dense(hidden, CLASSES, "softmax_linear", None)
    return tf.losses.sparse_softmax_cross_entropy(labels, logits)


def _dense(inputs, width, name, activation):
    with tf.variable_scope(name):
        with tf.device("/cpu:0"):
            weights = tf.get_variable("weights", [inputs.shape[1], width],
                                      initializer=tf.truncated_normal_initializer(stddev=0.1))
            biases = tf.get_variable("biases", [width], initializer=tf.zeros_initializer())
        out = tf.matmul(inputs, weights) + biases
        return activation(out) if activation else out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Asynchronous threads, on random data.")
    parser.add_argument("--num_gpus", type=int, default=4)
    parser.add_argument("--max_steps", type=int, default=1000)
    flags = parser.parse_args()
    train(flags.num_gpus, flags.max_steps)
