# The in-graph replicated tower pattern of cifar10_multi_gpu_train.py (TensorFlow 1.x style).
# Written for this lesson and shortened: the structure is the tutorial's, `inference` and
# `make_batch_queue` stand in for its CIFAR-10 model and input pipeline.
import tensorflow.compat.v1 as tf


def tower_loss(scope, images, labels):
    """Adds one tower's forward ops and loss to the graph; returns a tensor (nothing runs)."""
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

        # ---- BUILDING: this loop only adds ops to the graph --------------------------
        tower_grads = []
        with tf.variable_scope(tf.get_variable_scope()):
            for i in range(num_gpus):
                with tf.device('/gpu:%d' % i):                 # a label on the new ops
                    with tf.name_scope('tower_%d' % i) as scope:
                        image_batch, label_batch = batch_queue.dequeue()
                        loss = tower_loss(scope, image_batch, label_batch)
                        tf.get_variable_scope().reuse_variables()
                        grads = opt.compute_gradients(loss)    # backward ops, not values
                        tower_grads.append(grads)

        grads = average_gradients(tower_grads)   # on /cpu:0; its inputs come from every tower
        train_op = opt.apply_gradients(grads, global_step=global_step)

        # ---- RUNNING: nothing above has executed yet ----------------------------------
        sess = tf.Session(config=tf.ConfigProto(allow_soft_placement=True))
        sess.run(tf.global_variables_initializer())
        tf.train.start_queue_runners(sess=sess)
        for step in range(max_steps):
            _, loss_value = sess.run([train_op, loss])   # one step: every tower, at once
