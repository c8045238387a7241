# Batch norm synchronised across replicas in TensorFlow 2: Keras' BatchNormalization(
# synchronized=True) under tf.distribute.MirroredStrategy, written for this lesson (the loop
# of TensorFlow's tutorial "Custom training with tf.distribute.Strategy"). Where do they wait?
# A complete program: `simsync simulate synchronized_bn.py` imports the graph its step builds.
import numpy as np
import tensorflow as tf

REPLICAS = 2                                     # one replica per GPU (or per logical CPU)
FEATURES, HIDDEN, CLASSES = 256, 512, 10
BATCH_PER_REPLICA = 64
GLOBAL_BATCH = BATCH_PER_REPLICA * REPLICAS

if len(tf.config.list_physical_devices("GPU")) >= REPLICAS:
    devices = ["/gpu:%d" % i for i in range(REPLICAS)]
else:                                            # no GPUs here: logical CPUs stand in
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * REPLICAS)
    devices = ["/cpu:%d" % i for i in range(REPLICAS)]
strategy = tf.distribute.MirroredStrategy(devices)

with strategy.scope():                           # every variable mirrored on every replica
    model = tf.keras.Sequential([
        tf.keras.Input(shape=(FEATURES,)),
        tf.keras.layers.Dense(HIDDEN),
        # the batch statistics of every replica together, each step (TF1: SyncBatchNormalization)
        tf.keras.layers.BatchNormalization(synchronized=True),
        tf.keras.layers.ReLU(),
        tf.keras.layers.Dense(CLASSES),
    ])
    loss_object = tf.keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction="none")
    optimizer = tf.keras.optimizers.SGD(0.1)


def train_step(inputs):                          # runs once on EVERY replica
    images, labels = inputs
    with tf.GradientTape() as tape:
        logits = model(images, training=True)
        loss = tf.nn.compute_average_loss(
            loss_object(labels, logits), global_batch_size=GLOBAL_BATCH)
    gradients = tape.gradient(loss, model.trainable_variables)
    # each replica's optimizer sums the gradients of ALL replicas (an all-reduce), then applies
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    return loss


@tf.function
def distributed_train_step(inputs):
    per_replica_losses = strategy.run(train_step, args=(inputs,))
    return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica_losses, axis=None)


def make_dataset():
    """Random data standing in for a real input pipeline."""
    rng = np.random.default_rng(0)
    images = rng.normal(size=(4096, FEATURES)).astype("float32")
    labels = rng.integers(0, CLASSES, size=4096).astype("int32")
    dataset = tf.data.Dataset.from_tensor_slices((images, labels))
    return strategy.experimental_distribute_dataset(dataset.repeat().batch(GLOBAL_BATCH))


def main():
    batches = iter(make_dataset())
    for step in range(1000):
        loss = distributed_train_step(next(batches))
        if step % 100 == 0:
            print("step %d, loss %.3f" % (step, float(loss)))


if __name__ == "__main__":
    main()
