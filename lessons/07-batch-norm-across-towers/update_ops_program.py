# The answer's pattern as a complete program (TensorFlow 1.x style, written for this lesson):
# two towers, each with a batch-norm layer whose moving statistics are updated by the ops in
# its UPDATE_OPS collection, and the step gated on every tower's updates. As in the CIFAR-10
# tutorial, the variables (the moving statistics too) live on /cpu:0.
# `simsync simulate update_ops_program.py` imports the graph it builds.
import argparse

import tensorflow.compat.v1 as tf

tf.disable_eager_execution()

FEATURES, HIDDEN, CLASSES, BATCH = 16, 32, 4, 32


def dense(inputs, width, name):
    with tf.variable_scope(name), tf.device('/cpu:0'):
        weights = tf.get_variable('kernel', [inputs.shape[1], width])
        biases = tf.get_variable('bias', [width], initializer=tf.zeros_initializer())
    return tf.matmul(inputs, weights) + biases


def batch_norm(x, name, momentum=0.99):
    """Batch norm as tf.layers made it: normalise with the batch's statistics, and put the
    updates of the moving statistics in the UPDATE_OPS collection (nothing runs them)."""
    with tf.variable_scope(name):
        width = x.shape[1]
        with tf.device('/cpu:0'):
            gamma = tf.get_variable('gamma', [width], initializer=tf.ones_initializer())
            beta = tf.get_variable('beta', [width], initializer=tf.zeros_initializer())
            moving = [tf.get_variable(n, [width], initializer=init, trainable=False)
                      for n, init in (('moving_mean', tf.zeros_initializer()),
                                      ('moving_variance', tf.ones_initializer()))]
        mean, variance = tf.nn.moments(x, [0])
        for variable, value in zip(moving, (mean, variance)):
            update = tf.assign_sub(variable, (variable - value) * (1 - momentum))
            tf.add_to_collection(tf.GraphKeys.UPDATE_OPS, update)
        return tf.nn.batch_normalization(x, mean, variance, beta, gamma, 1e-3)


def tower_loss(images, labels):
    hidden = tf.nn.relu(batch_norm(dense(images, HIDDEN, 'hidden'), 'bn'))
    logits = dense(hidden, CLASSES, 'logits')
    return tf.losses.sparse_softmax_cross_entropy(labels, logits)


def average_gradients(tower_grads):
    average_grads = []
    for grad_and_vars in zip(*tower_grads):
        grads = [tf.expand_dims(g, 0) for g, _ in grad_and_vars]
        average_grads.append((tf.reduce_mean(tf.concat(grads, 0), 0), grad_and_vars[0][1]))
    return average_grads


def train(num_gpus, max_steps):
    with tf.Graph().as_default():
        opt = tf.train.GradientDescentOptimizer(0.1)
        devices = ['/gpu:%d' % i for i in range(num_gpus)]
        averaging_device = '/cpu:0'
        update_ops, tower_grads = [], []
        for i, device in enumerate(devices):
            with tf.name_scope('tower_%d' % i) as name_scope:
                with tf.variable_scope('foo', reuse=bool(i > 0)):
                    with tf.device(device):
                        images = tf.random.normal([BATCH, FEATURES])
                        labels = tf.random.uniform([BATCH], 0, CLASSES, dtype=tf.int32)
                        loss = tower_loss(images, labels)
                        tower_grads.append(opt.compute_gradients(loss))
                update_ops.extend(tf.get_collection(tf.GraphKeys.UPDATE_OPS, name_scope))
        with tf.device(averaging_device):
            with tf.control_dependencies(update_ops):       # the gate of the answer
                train_op = opt.apply_gradients(average_gradients(tower_grads))
        sess = tf.Session(config=tf.ConfigProto(allow_soft_placement=True))
        sess.run(tf.global_variables_initializer())
        for step in range(max_steps):
            sess.run([train_op, loss])


if __name__ == '__main__':
    parser = argparse.ArgumentParser(description='Two towers with batch norm, gated updates.')
    parser.add_argument('--num_gpus', type=int, default=2)
    parser.add_argument('--max_steps', type=int, default=1000)
    flags = parser.parse_args()
    train(flags.num_gpus, flags.max_steps)
