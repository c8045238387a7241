"""A 4-tower program in the tutorial's style, deep enough for about 1,000 TensorFlow ops per
tower (LAYERS dense layers of WIDTH units, their gradients and bookkeeping), for
bench/import_program.py: variables on the CPU, average_gradients, GradientDescent."""

import tensorflow as tf

tf.compat.v1.disable_eager_execution()

NUM_GPUS, LAYERS, WIDTH, BATCH = 4, 40, 32, 16


def tower_loss(images):
    hidden = images
    for layer in range(LAYERS):
        with tf.compat.v1.variable_scope(f"layer_{layer}"):
            with tf.device("/cpu:0"):
                weights = tf.compat.v1.get_variable("weights", [WIDTH, WIDTH])
                biases = tf.compat.v1.get_variable("biases", [WIDTH])
            hidden = tf.nn.relu(tf.matmul(hidden, weights) + biases)
    return tf.reduce_mean(tf.square(hidden))


def average_gradients(tower_grads):
    average_grads = []
    for grad_and_vars in zip(*tower_grads):
        grads = [tf.expand_dims(g, 0) for g, _ in grad_and_vars]
        average_grads.append((tf.reduce_mean(tf.concat(grads, 0), 0), grad_and_vars[0][1]))
    return average_grads


with tf.Graph().as_default(), tf.device("/cpu:0"):
    opt = tf.compat.v1.train.GradientDescentOptimizer(0.01)
    tower_grads = []
    with tf.compat.v1.variable_scope(tf.compat.v1.get_variable_scope()):
        for i in range(NUM_GPUS):
            with tf.device(f"/gpu:{i}"), tf.name_scope(f"tower_{i}"):
                loss = tower_loss(tf.random.normal([BATCH, WIDTH]))
                tf.compat.v1.get_variable_scope().reuse_variables()
                tower_grads.append(opt.compute_gradients(loss))
    train_op = opt.apply_gradients(average_gradients(tower_grads))
    sess = tf.compat.v1.Session()
    sess.run(tf.compat.v1.global_variables_initializer())
    while True:
        sess.run(train_op)
