// Package atomicfile writes files so that a crash or an error never leaves a torn one where a
// reader looks: a file is written in full and fsynced before it is renamed into place, and the
// rename is made durable by syncing its directory. It is gorec's one way of writing files
// durably: embedding's checkpoints and deltas and nn's state files go through it.
package atomicfile
