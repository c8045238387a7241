# average_gradients as in cifar10_multi_gpu_train.py (TensorFlow 1.x style), written for this
# lesson, and the two lines of train() that use it. Look for a wait, a lock or a barrier.
import tensorflow.compat.v1 as tf


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
        grad = tf.concat(grads, 0)                   # a new op: input from EVERY tower
        grad = tf.reduce_mean(grad, 0)               # a new op: input from the concat
        var = grad_and_vars[0][1]                    # the variable is shared: take tower 0's
        average_grads.append((grad, var))
    return average_grads


# ... in train(), after the tower loop has filled tower_grads (one list per GPU):
grads = average_gradients(tower_grads)             # builds the ops, on /cpu:0
train_op = opt.apply_gradients(grads, global_step=global_step)
