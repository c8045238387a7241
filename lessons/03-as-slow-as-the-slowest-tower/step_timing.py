# The training loop of cifar10_multi_gpu_train.py (TensorFlow 1.x style), written for this
# lesson. One sess.run is one synchronous step of every tower; `duration` is the step time
# this lesson predicts.
import time

for step in range(max_steps):
    start_time = time.time()
    _, loss_value = sess.run([train_op, loss])   # returns once apply_gradients has run,
    duration = time.time() - start_time          # so after the slowest tower's gradients

    if step % 10 == 0:
        num_examples_per_step = batch_size * num_gpus
        examples_per_sec = num_examples_per_step / duration
        sec_per_batch = duration / num_gpus
        print('step %d, loss = %.2f (%.1f examples/sec; %.3f sec/batch)'
              % (step, loss_value, examples_per_sec, sec_per_batch))
