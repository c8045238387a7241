# average_gradients as in cifar10_multi_gpu_train.py (TensorFlow 1.x style), written for this
# lesson, and the train() that uses it. Look for a wait, a lock or a barrier.
# A complete program: `simsync simulate average_gradients.py` imports the graph it builds;
# `inference` and `make_batch_queue` (at the bottom) stand in for the tutorial's model and input.
import argparse

import tensorflow.compat.v1 as tf

tf.disable_eager_execution()                     # TensorFlow 1.x behaviour under TF 2


def average_gradients(tower_grads):
    """Calculate the average gradient for each shared variable across all towers.

    Note that this function provides a synchronization point across all towers.

    Args:
      tower_grads: a list (one entry per tower) of lists of (gradient, variable) pairs.
    Returns:
      a list of (gradient, variable) pairs, each gradient averaged across all towers.
    """
    average_grads = []
    for grad_and_vars in zip(*tower_grads):
        # grad_and_vars: ((grad_0_gpu0, var_0), (grad_0_gpu1, var_0), ..., (grad_0_gpuN, var_0))
        grads = [tf.expand_dims(g, 0) for g, _ in grad_and_vars]
        grad = tf.concat(grads, 0)                   # builds an op: computes nothing yet
        grad = tf.reduce_mean(grad, 0)               # builds an op: computes nothing yet
        var = grad_and_vars[0][1]                    # the variable is shared: take tower 0's
        average_grads.append((grad, var))
    return average_grads


def train(num_gpus, max_steps):
    with tf.Graph().as_default(), tf.device('/cpu:0'):
        global_step = tf.train.get_or_create_global_step()
        opt = tf.train.GradientDescentOptimizer(0.1)
        batch_queue = make_batch_queue()

        tower_grads = []                             # the tower loop: one list per GPU
        with tf.variable_scope(tf.get_variable_scope()):
            for i in range(num_gpus):
                with tf.device('/gpu:%d' % i), tf.name_scope('tower_%d' % i):
                    images, labels = batch_queue.dequeue()
                    loss = tf.losses.sparse_softmax_cross_entropy(labels, inference(images))
                    tf.get_variable_scope().reuse_variables()
                    tower_grads.append(opt.compute_gradients(loss))

        grads = average_gradients(tower_grads)       # builds the ops, on /cpu:0
        train_op = opt.apply_gradients(grads, global_step=global_step)

        sess = tf.Session(config=tf.ConfigProto(allow_soft_placement=True))
        sess.run(tf.global_variables_initializer())
        tf.train.start_queue_runners(sess=sess)
        for step in range(max_steps):
            sess.run(train_op)                       # every tower, then the average, then apply


# ---- the stand-ins: a small model and random examples ----------------------------------
FEATURES, CLASSES, BATCH = 64, 10, 32


def inference(images):
    """Two dense layers; the variables live on /cpu:0, whichever device builds the tower."""
    hidden = _dense(images, 128, 'hidden', tf.nn.relu)
    return _dense(hidden, CLASSES, 'softmax_linear', None)


def _dense(inputs, width, name, activation):
    with tf.variable_scope(name):
        with tf.device('/cpu:0'):
            weights = tf.get_variable('weights', [inputs.shape[1], width],
                                      initializer=tf.truncated_normal_initializer(stddev=0.1))
            biases = tf.get_variable('biases', [width], initializer=tf.zeros_initializer())
        out = tf.matmul(inputs, weights) + biases
        return activation(out) if activation else out


class RandomBatches:
    """Each dequeue() makes a batch of random (images, labels) in the tower itself: no queue
    and no queue runner threads, so that only the towers' work decides who comes last.
    (Lesson 1's tower_loop.py has a real FIFOQueue filled by queue runner threads.)"""

    def dequeue(self):
        return (tf.random.normal([BATCH, FEATURES]),
                tf.random.uniform([BATCH], 0, CLASSES, dtype=tf.int32))


def make_batch_queue():
    return RandomBatches()


if __name__ == '__main__':
    parser = argparse.ArgumentParser(description='The tower loop, averaging every gradient.')
    parser.add_argument('--num_gpus', type=int, default=4)
    parser.add_argument('--max_steps', type=int, default=1000)
    flags = parser.parse_args()
    train(flags.num_gpus, flags.max_steps)
