# A well-known Stack Overflow answer ("Asynchronous computation in
# TensorFlow": run several sess.run(train_op) threads at once),
# multi-GPU variant in TensorFlow 1.x style, written for this lesson:
# one train op per GPU, one Python thread per train op, all threads
# on ONE session.
import itertools
import threading

import tensorflow.compat.v1 as tf

train_ops = []
for i in range(NUM_GPUS):
    with tf.device("/gpu:%d" % i):
        loss = tower_loss(i)  # reads the shared variables (/cpu:0)
        opt = tf.train.GradientDescentOptimizer(0.1)
        train_ops.append(opt.minimize(loss))

sess = tf.Session()
sess.run(tf.global_variables_initializer())

# One pool of updates for all threads (the answer's threads loop forever).
updates = itertools.count()


def train_function(train_op):
    while next(updates) < MAX_STEPS:
        sess.run(train_op)  # read, forward, backward, apply


threads = [threading.Thread(target=train_function, args=(op,))
           for op in train_ops]
for t in threads:
    t.start()  # nothing coordinates the threads but the variables
for t in threads:
    t.join()
