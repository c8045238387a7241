"""The tower loop of cifar10_multi_gpu_train.py, in your own TensorFlow code (tf.compat.v1).

The model, the input queue and the training loop are given. Write the three functions under
the "Task" banners; `simsync simulate train.py` shows what your graph does.
"""

import tensorflow as tf

tf.compat.v1.disable_eager_execution()

NUM_GPUS = 4
BATCH = 32
FEATURES, HIDDEN, CLASSES = 64, 128, 10


# ## Task 4.1: the tower loop


def _variable_on_cpu(name, shape):
    """A variable of this name and shape (truncated normal, stddev 0.1) kept on the CPU,
    whichever device the code around it asked for."""
    with tf.device("/cpu:0"):
        return tf.compat.v1.get_variable(
            name, shape, initializer=tf.compat.v1.truncated_normal_initializer(stddev=0.1)
        )


def tower_loop(opt, queue):
    """One tower per GPU: under tf.device('/gpu:i') and tf.name_scope('tower_i'), a batch
    from the queue, its loss (tower_loss) and its gradients (opt.compute_gradients). The
    towers share one set of variables. Returns each tower's gradients and the last tower's
    loss."""
    tower_grads = []
    with tf.compat.v1.variable_scope(tf.compat.v1.get_variable_scope()):
        for i in range(NUM_GPUS):
            with tf.device(f"/gpu:{i}"), tf.name_scope(f"tower_{i}") as scope:
                images, labels = queue.dequeue()
                loss = tower_loss(scope, images, labels)
                tf.compat.v1.get_variable_scope().reuse_variables()
                tower_grads.append(opt.compute_gradients(loss))
    return tower_grads, loss


# ## Task 4.2: average_gradients


def average_gradients(tower_grads):
    """For each variable, the mean of every tower's gradient: a list of (gradient, variable)
    as opt.apply_gradients takes it."""
    average_grads = []
    for grad_and_vars in zip(*tower_grads, strict=True):
        grads = [tf.expand_dims(g, 0) for g, _ in grad_and_vars]
        grad = tf.reduce_mean(tf.concat(axis=0, values=grads), 0)
        average_grads.append((grad, grad_and_vars[0][1]))
    return average_grads


# ## Given code: the model, the input queue, the training loop


def inference(images):
    with tf.compat.v1.variable_scope("hidden"):
        weights = _variable_on_cpu("weights", [FEATURES, HIDDEN])
        biases = _variable_on_cpu("biases", [HIDDEN])
        hidden = tf.nn.relu(tf.matmul(images, weights) + biases)
    with tf.compat.v1.variable_scope("softmax_linear"):
        weights = _variable_on_cpu("weights", [HIDDEN, CLASSES])
        biases = _variable_on_cpu("biases", [CLASSES])
        return tf.matmul(hidden, weights) + biases


def tower_loss(scope, images, labels):
    logits = inference(images)
    cross_entropy = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    tf.compat.v1.add_to_collection("losses", tf.reduce_mean(cross_entropy))
    return tf.add_n(tf.compat.v1.get_collection("losses", scope), name="total_loss")


def train():
    with tf.Graph().as_default(), tf.device("/cpu:0"):
        global_step = tf.compat.v1.train.get_or_create_global_step()
        opt = tf.compat.v1.train.GradientDescentOptimizer(0.1)
        queue = tf.queue.FIFOQueue(
            2 * NUM_GPUS, [tf.float32, tf.int32], shapes=[[BATCH, FEATURES], [BATCH]]
        )
        batch = [
            tf.random.normal([BATCH, FEATURES]),
            tf.random.uniform([BATCH], 0, CLASSES, dtype=tf.int32),
        ]
        tf.compat.v1.train.add_queue_runner(
            tf.compat.v1.train.QueueRunner(queue, [queue.enqueue(batch)] * 2)
        )
        tower_grads, loss = tower_loop(opt, queue)
        grads = average_gradients(tower_grads)
        train_op = opt.apply_gradients(grads, global_step=global_step, name="apply_gradients")
        sess = tf.compat.v1.Session(config=tf.compat.v1.ConfigProto(allow_soft_placement=True))
        sess.run(tf.compat.v1.global_variables_initializer())
        tf.compat.v1.train.start_queue_runners(sess=sess)
        for step in range(1000):
            _, loss_value = sess.run([train_op, loss])
            if step % 100 == 0:
                print(f"step {step}, loss = {loss_value:.3f}")


if __name__ == "__main__":
    train()
