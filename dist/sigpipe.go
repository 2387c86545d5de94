package dist

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

var sigpipeOnce sync.Once

// catchSIGPIPE keeps a peer's death from killing the process. Gloo writes to its sockets from
// its own threads; a write to a connection the peer has closed raises SIGPIPE on such a thread,
// and Go kills the process for a SIGPIPE on a non-Go thread unless the program asked for the
// signal. Asking for it (a channel that nobody needs to read: the runtime drops what does not
// fit) turns it into the EPIPE error Gloo reports as a failed peer. As for any program that
// calls signal.Notify for SIGPIPE, a write to a closed standard output then fails with EPIPE
// instead of ending the program. (Debian's Gloo and c10d were not seen raising SIGPIPE in
// TestKilledRank, which kills a rank while rank 0 streams broadcasts to it: they appear to
// send with MSG_NOSIGNAL or to see the reset on a read first. Other builds may not.)
func catchSIGPIPE() {
	sigpipeOnce.Do(func() { signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE) })
}
