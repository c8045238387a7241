# Lesson 4's train_function (from a Stack Overflow answer on
# asynchronous training) with a staleness bound (stale-synchronous
# parallel), written for this lesson. BOUND = 0 gives synchronous
# rounds; without the wait, it is lesson 4's asynchronous SGD.
import itertools
import threading

updates = itertools.count()  # one pool of updates for all threads
finished = [0] * NUM_GPUS    # updates each worker has finished
changed = threading.Condition()


def train_function(worker, train_op):
    while next(updates) < MAX_STEPS:
        k = finished[worker]  # this worker's next update, from 0
        with changed:  # wait until EVERY worker finished k - BOUND
            changed.wait_for(lambda: min(finished) >= k - BOUND)
        sess.run(train_op)  # read, forward, backward, apply
        with changed:
            finished[worker] += 1
            changed.notify_all()


# max_staleness: drop a gradient if more than MAX_STALENESS updates
# landed since its read. TensorFlow 1.x has a wrapper optimizer for
# it, which counts the updates with the global step:
opt = tf.contrib.opt.DropStaleGradientOptimizer(
    tf.train.GradientDescentOptimizer(0.05), staleness=MAX_STALENESS)
