// Package dist runs gorec on several processes: process groups over torch.distributed's own
// engine, c10d's ProcessGroupGloo (the C++ is in cgotorch, see cgotorch.h "Process groups"),
// modelled on torch.distributed.
//
// # Starting a group
//
// Every process of a job (a rank) starts a Group. FromEnv reads the environment that torchrun,
// Kubernetes' PyTorchJob or a Slurm script sets (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
// LOCAL_RANK):
//
//	torchrun --no_python --nproc_per_node 2 --redirects 1 --tee 1 ./trainer
//
// (torchrun 2.x also spells them --no-python --nproc-per-node; --redirects 1 --tee 1 works
// around Debian's torchrun 1.13 under Python 3.11, which fails on the default.)
//
// New takes explicit Options instead: a TCPStore that rank 0 serves at the given address, or a
// FileStore (one machine, tests). The ranks meet through the store, check each other's
// identity, then connect Gloo. Options.Timeout bounds the start and every collective.
//
// # Collectives
//
// AllReduce (Sum, Avg, Max), Broadcast, AllGather, AllToAll with uneven splits (ExchangeSplits
// finds the receive splits) and Barrier work on CPU tensors of cgotorch. Inputs are not
// modified; results are new tensors, owned by the caller. Gloo only ever sees libtorch's
// memory, never Go's. BytesSent counts the payload a rank has sent.
//
// On GPUs, Options.Backend NCCL (or $GOREC_DIST_BACKEND=nccl) adds a c10d ProcessGroupNCCL on
// the rank's GPU (Options.Device, cuda:LOCAL_RANK by default): the collectives then take that
// GPU's tensors too and move them through NCCL, while CPU tensors and the ranks' agreement before
// each collective stay on Gloo. NCCL is built in only with the gorec_nccl build tag against a
// libtorch with CUDA and NCCL (make cuda-test-bins; NCCLAvailable); elsewhere it is an ErrConfig
// error wrapping errors.ErrUnsupported. A sharded table may keep its shard on a GPU
// (embedding.Config.Device); its rows travel between the ranks on the CPU.
//
// A group's methods are safe from any goroutine: its collectives run one at a time, in the
// order they are called. Every rank must call the same collectives in the same order, with the
// same shapes and dtypes (AllToAll: matching splits): Gloo pairs the ranks' calls by their
// position in that order.
//
// # Data-parallel dense layers
//
// DataParallel replicates a model's dense layers as torch's DistributedDataParallel does:
// NewDataParallel checks that every rank's model has the same parameters and buffers and
// copies rank 0's to every rank; the optimizer made from the DataParallel (one made from the
// model is refused) averages the gradients over the ranks at the start of each Step, one
// all-reduce per bucket of parameters (DataParallelOptions.BucketBytes, 25 MiB by default),
// and copies rank 0's buffers (BatchNorm1d's running statistics) to every rank. Each rank
// trains on its slice of the global batch with a mean-reduced loss (with sharded tables, see
// below); the replicas stay equal, and equal to one process's training on the whole batch up
// to float32 rounding. Embedding tables are not averaged: they are the model's Steppers,
// stepped by the same optimizer.
//
// # Failures
//
// A dead peer (ErrPeer), a rank that skips a collective or stalls (ErrTimeout, after the
// group's timeout), or an invalid argument on this rank (ErrInvalidArgument; the peers then
// time out) make the collective return an error, on every rank, within the timeout. The process
// is never ended by it: package dist keeps Gloo's SIGPIPE from killing it (see catchSIGPIPE).
// The group is then out of step and unusable: the error also wraps ErrBroken, and so does every
// later call. Close every rank's group and start again, for example from the last checkpoint.
//
// # Sharded tables
//
// A ShardedTable is an embedding table sharded by id: Owner(id, WorldSize) (a splitmix64 mix
// of the id, modulo the world size) holds an id's row and optimizer state in its shard, an
// embedding.Table named as the sharded table on every rank. Rows start as those of a table of
// that name and Seed in one process (embedding.Config.Seed), whatever the world size. Its operations (Lookup,
// Read, Write, Update, Delete, Len, Stats, Export) are collective. Each rank deduplicates its ids
// and sends them to their owners. The ranks validate their input and agree before any shard
// changes. NewShardedTable fails on every rank when their Configs differ. It is an
// nn.EmbeddingTable, so model code trains it unchanged:
//
//	users, err := dist.NewShardedTable(g, "users", embedding.Config{Dim: 64, Optimizer: embedding.Adagrad{}})
//	emb := nn.NewEmbedding(users, nn.EmbeddingOptions{}) // in the model
//	opt, err := nn.NewAdam(model, nn.AdamOptions{})      // Step sends the gradients to the owners
//
// Each rank trains on its own slice of the global batch, and its loss is summed, not averaged,
// over the slice (or divided by the global batch size). The owners then sum the ranks'
// gradients per id, as one process would.
//
// # Many tables, few exchanges
//
// Every exchange between ranks costs a round trip whatever it carries, so the tables of a
// model share them. The optimizer's Step sends the pending gradients of all the model's sharded
// tables in one all-to-all and gathers the owners' verdicts in one more (StepAll, through
// nn.JointTable), whatever the number of tables; each table still steps or refuses its input as
// its own Step would. A training Forward fetches its rows when the model calls it, two
// all-to-alls per lookup; TrainStep fetches the rows of every lookup of a batch in two for all
// of them before the forward pass, and trains as the plain loop does, bit for bit:
//
//	lookups := func(b Batch) []dist.Prefetch { ... } // the model's lookups of b, in its order
//	loss, err := dist.TrainStep(opt, lookups, lossOf, b)
//
// An nn.EmbeddingBagCollection or nn.EmbeddingCollection over sharded tables (TorchRec's
// sharded collections) needs no list: its Forward fetches the rows of all its features in two
// all-to-alls (ForwardBags, ForwardEach), so the plain loop of a model whose tables sit in one
// collection runs 4 collectives per step for them, however many. CollectionPrefetches lists a
// collection's lookups for TrainStep and TrainPipeline. A collection's bad input on one rank
// (a missing key, bad bounds or ids) fails every rank's Forward, or TrainStep with those
// lookups, and changes nothing: the refusing rank still takes part in the exchange, its
// refusal as its verdict (CollectionPrefetches returns no error for it but carries it in its
// lookups), so the ranks stay in step.
//
// Group.Collectives counts a rank's collectives (per step in the benchmarks).
//
// # Sharded tables and dense layers together
//
// The two scale a rank's gradients differently: DataParallel averages the dense gradients
// over the ranks, while a sharded table's owners sum theirs. A loss averaged over each rank's
// slice, as with DataParallel alone, makes the tables' gradients world-size times too large
// (with SGD, momentum, Adagrad or SparseAdam alike). Divide each rank's summed loss by the
// global batch size instead, and make the DataParallel sum the dense gradients too:
//
//	ddp, err := dist.NewDataParallel(g, model, dist.DataParallelOptions{SumGradients: true})
//	opt, err := nn.NewAdam(ddp, nn.AdamOptions{})
//	loss := lossSum(model.Forward(x), y).DivScalar(globalBatch) // x: this rank's slice
//
// Both parts then get the gradients of the global batch's mean loss, and train as one process
// would on the whole batch, up to float32 rounding.
//
// # Pipelined training
//
// TrainPipeline overlaps the next batch's exchange of ids and rows (TrainStep's, for all its
// lookups at once) with the current batch's forward and backward passes, as TorchRec's
// TrainPipelineSparseDist does. It is exact: after
// the current batch's Step, the owners send again the rows of the next batch's ids that the
// Step changed (every fetched row with SGD momentum, which moves rows absent from a step), so
// it trains as the plain loop does, bit for bit. The model code is unchanged; the pipeline is
// told which lookups a batch runs:
//
//	p, err := dist.NewTrainPipeline(opt, lookups, loss, dist.TrainPipelineOptions{}) // lookups(b) []Prefetch
//	for b := range batches {
//		loss, trained, err := p.Progress(b) // trains on the previous batch while b's rows come
//	}
//	loss, trained, err := p.Flush() // the last batch
//
// With TrainPipelineOptions.FetchGroup, a Group.Fork (a second group of the same ranks), the
// fetch overlaps the Step too. On one loaded machine's loopback, where the CTR benchmark's
// dense compute takes a millisecond against an exchange of 10 to 25, only that form keeps up
// (BenchmarkCTRTrainRanks, five runs: 2-pipelined-fork 0.92 to 1.19 times the plain loop's
// samples/s, median 1.08; 2-pipelined 0.62 to 0.99, median 0.73: the patch's all-to-all costs
// more than the short compute hides).
//
// # Checkpoints
//
// ShardedTable.Save writes every rank's shard into one directory, and rank 0 commits a
// manifest once they are all durable. LoadShardedTable opens the table on any world size.
// SaveCheckpoint does the same for a whole model: its sharded tables, its replicated dense
// layers and the optimizer's state, into one directory; LoadCheckpoint restores it into the
// model built afresh, on any world size (nn's own model checkpoints refuse sharded tables):
//
//	err := dist.SaveCheckpoint(ctx, g, dir, ddp, opt) // every rank, between steps
//	err := dist.LoadCheckpoint(ctx, g, dir, ddp, opt) // a restarted job, before training
//
// SaveCheckpointWith and LoadCheckpointWith carry the rest of what a job resumes from (a
// learning-rate schedule, a data cursor) as rank 0's files. A directory holds one checkpoint:
// a save refuses a directory that holds another, and one whose parts rank 0 cannot see (ranks
// without a shared file system). embedding.IsCheckpoint tells a restarted job whether there is
// one to resume from.
//
// # Keeping a table within bounds
//
// ShardedTable.Evict removes rows by embedding's policies across the shards (collective, with
// Config.TrackAccess): TTL by each row's age, as one table would; KeepRecent and KeepFrequent
// keep the n rows of the whole table that one table's ranking keeps, found in at most 16 small
// all-reduces of byte counts; MemoryBudget bounds each rank's shard, as a process's memory.
// Compact compacts every shard. SetAdmission gives a new id its row at its k-th training
// lookup. Frequencies and admission counts are those of one table fed every rank's batch:
// every occurrence counts. Evict between steps:
//
//	_, removed, err := users.Evict(ctx, embedding.KeepRecent(50_000_000), false)
//
// # Who may join
//
// c10d's TCPStore and Gloo authenticate nobody: anyone who can reach the store's port or Gloo's
// sockets can join a job, read its tensors or feed it data. The job's network must be private
// (a cluster network, a Kubernetes namespace with a network policy, a firewall). Within it, the
// group keeps jobs apart: every rank announces the job's identity (Options.Job, or
// $GOREC_JOB_ID, or torchrun's run id) and world size through the store before any data moves,
// and a rank of another job, one announcing another world size, or a second process claiming a
// rank, is refused with ErrRefused. Rank 0's store server listens on the store address only
// where libtorch allows it (StoreBindsAddress: libtorch 2.x); Gloo binds to Options.Interface
// ($GLOO_SOCKET_IFNAME) or Options.Host.
package dist
