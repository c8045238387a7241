# The in-graph replicated tower pattern of cifar10_multi_gpu_train.py (TensorFlow 1.x style).
# Written for this lesson and shortened: the structure is the tutorial's; `inference` and
# `make_batch_queue` (at the bottom) stand in for its CIFAR-10 model and input pipeline.
# A complete program: `simsync simulate tower_loop.py` imports the graph it builds.
import argparse

import tensorflow.compat.v1 as tf

tf.disable_eager_execution()                     # TensorFlow 1.x behaviour under TF 2


def tower_loss(scope, images, labels):
    """One tower's forward pass and loss: returns its total loss."""
    logits = inference(images)                   # variables shared by every tower
    tf.losses.sparse_softmax_cross_entropy(labels, logits)
    losses = tf.get_collection(tf.GraphKeys.LOSSES, scope)
    return tf.add_n(losses, name='total_loss')


def average_gradients(tower_grads):
    """One averaged gradient per variable, from every tower's (gradient, variable) pairs."""
    average_grads = []
    for grad_and_vars in zip(*tower_grads):      # ((g_0, v), (g_1, v), ...) for one variable
        grads = [tf.expand_dims(g, 0) for g, _ in grad_and_vars]
        grad = tf.reduce_mean(tf.concat(grads, 0), 0)
        average_grads.append((grad, grad_and_vars[0][1]))
    return average_grads


def train(num_gpus, max_steps):
    with tf.Graph().as_default(), tf.device('/cpu:0'):
        global_step = tf.train.get_or_create_global_step()
        opt = tf.train.GradientDescentOptimizer(0.1)
        batch_queue = make_batch_queue()         # images and labels, prefetched on /cpu:0

        # ---- BUILDING ----
        tower_grads = []
        with tf.variable_scope(tf.get_variable_scope()):
            for i in range(num_gpus):
                with tf.device('/gpu:%d' % i):                 # a label on the new ops
                    with tf.name_scope('tower_%d' % i) as scope:
                        image_batch, label_batch = batch_queue.dequeue()
                        loss = tower_loss(scope, image_batch, label_batch)
                        tf.get_variable_scope().reuse_variables()
                        grads = opt.compute_gradients(loss)    # the backward pass
                        tower_grads.append(grads)

        grads = average_gradients(tower_grads)   # on /cpu:0; its inputs come from every tower
        train_op = opt.apply_gradients(grads, global_step=global_step)

        # ---- RUNNING ----
        sess = tf.Session(config=tf.ConfigProto(allow_soft_placement=True))
        sess.run(tf.global_variables_initializer())
        tf.train.start_queue_runners(sess=sess)
        for step in range(max_steps):
            _, loss_value = sess.run([train_op, loss])   # one step: every tower, at once


# ---- the stand-ins: a small model and an input queue of random examples ----------------
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


def make_batch_queue():
    """A FIFO queue of (images, labels) batches, filled by a queue runner on /cpu:0."""
    queue = tf.FIFOQueue(4, [tf.float32, tf.int32], shapes=[[BATCH, FEATURES], [BATCH]])
    batch = [tf.random.normal([BATCH, FEATURES]),
             tf.random.uniform([BATCH], 0, CLASSES, dtype=tf.int32)]
    tf.train.add_queue_runner(tf.train.QueueRunner(queue, [queue.enqueue(batch)] * 2))
    return queue


if __name__ == '__main__':
    parser = argparse.ArgumentParser(description='The tower loop, training on random data.')
    parser.add_argument('--num_gpus', type=int, default=2)
    parser.add_argument('--max_steps', type=int, default=1000)
    flags = parser.parse_args()
    train(flags.num_gpus, flags.max_steps)
