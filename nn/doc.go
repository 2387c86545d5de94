// Package nn is gorec's dense neural-network layer: modules, losses, optimizers and state files,
// in pure Go over cgotorch, computing what PyTorch 1.13's torch.nn and torch.optim compute.
//
// # Modules
//
// A Module is a layer or a model: named parameters, a train/eval mode and, for the hash
// embedding modules, the Steppers of their tables (see the interface). Its Forward is its own
// method, with the inputs it needs: a Layer is a Module of one tensor in and one out, and
// EmbeddingBag.Forward takes ids and offsets. There is no reflection: a module lists its own
// parameters, and composite modules list their children's with a name prefix. Sequential chains
// Layers and names them "0", "1", ... as PyTorch does, so state names match a torch state_dict
// ("0.weight", "2.bias"). A model of your own embeds Container, Adds its children by name
// (embedding modules and bags included) and writes its Forward. Leaf modules embed Base (mode
// only) or Stateless (no parameters).
//
// The layers are Linear, Dropout, LayerNorm, BatchNorm1d and the activations ReLU, Sigmoid, Tanh
// and LeakyReLU; the losses BCEWithLogits, MSE and CrossEntropy wrap cgotorch's.
//
// EmbeddingBagCollection is TorchRec's: several features' bags (a KeyedJagged input), each
// pooled from its table, looked up and pooled in one C call and stepped in one, with the numbers
// of one EmbeddingBag per feature. EmbeddingCollection is TorchRec's too: several features'
// ids looked up without pooling, one [N, Dim] tensor per feature, with the numbers of one
// Embedding per feature. Over sharded tables (dist.ShardedTable, a JointLookupTable) either
// fetches every feature's rows in one exchange.
//
// To(model, device, dtype) moves a model's parameters, gradients and buffers to a device (a
// GPU) and/or a floating-point dtype in place, as PyTorch's module.to: the same tensors, so
// call it before creating the optimizers, whose state sits next to the parameters.
//
// # Optimizers
//
// NewSGD, NewAdam, NewAdamW and NewAdagrad make an *Optimizer from the whole model (any
// Trainable): its parameters form the first parameter group (each group with its learning rate
// and weight decay), updated by PyTorch's rule with in-place tensor operations under
// cgotorch.NoGrad, and the Steppers of its embedding modules (SparseModule, collected through
// Container) are stepped by their tables' own sparse rules. So
//
//	opt, _ := nn.NewAdam(model, nn.DefaultAdamOptions())
//
// makes one opt.ZeroGrad(), one opt.Step() and one opt.SetLR cover the whole model, tables
// included. A model that is a GradientSyncer (dist.DataParallel) has its gradients combined
// across processes at the start of Step; the parameters it claims (ClaimParameters) are refused
// by an optimizer made from anything else. ParamList(ps) is a Trainable of bare parameters (no
// tables): an Embedding whose table no optimizer steps panics after MaxLookupsWithoutStep
// training lookups instead of letting its pending gradients grow without bound.
//
// A zero field of an options type (SGDOptions, AdamOptions, AdagradOptions, a ParamGroup's
// LR and WeightDecay, LeakyReLU's Slope) means the documented default, PyTorch's, as in
// embedding.Config: AdamOptions{LR: 1e-3} has betas (0.9, 0.999) and eps 1e-8. Where 0 is a
// meaningful value, Zero() asks for it: AdamOptions{Eps: nn.Zero()}.
//
// A Scheduler sets the learning rates of an optimizer's groups and tables by a Schedule (StepLR, ExponentialLR, CosineAnnealingLR, LinearLR: torch.optim.lr_scheduler's);
// ClipGradNorm is torch.nn.utils.clip_grad_norm_ on the dense gradients.
//
// # Training on several cores
//
// The synchronous loop (ZeroGrad, forward, Backward, Step) is the default and reproducible to
// the bit. Hogwild trains one model with several goroutines, each on its own batches from a
// channel, against the same tables (asynchronous updates, as DeepRec and XDL offer on CPUs):
// with one worker it gives the synchronous loop's numbers bit for bit; with more, each batch is
// trained once and each update is applied whole, in an order that varies (see Hogwild).
//
// # State files and checkpoints
//
// SaveState and LoadState write and read a module's parameters and buffers (StateDict) in the
// safetensors format, under torch's state_dict names, so that state moves between gorec and
// PyTorch; Optimizer.SaveState and LoadState do the same for an optimizer's state (torch.optim's
// state names and param_groups), so that a run trained in PyTorch resumes here. Every
// safetensors dtype that cgotorch has a DType for reads and writes (F32, F64, F16, BF16, I64,
// I32, I16, I8, U8, BOOL), and LoadState converts to the parameters' dtypes: the state of a
// half-precision torch model loads into a Float32 one. Malformed files are errors (wrapping
// ErrFormat), never panics.
//
// SaveCheckpoint writes a whole model (its embedding tables and dense state) to a directory in
// one crash-safe call; SaveTrainingCheckpoint adds the optimizer's state and the random
// generator's, so that LoadTrainingCheckpoint resumes training with the numbers of the run that
// never stopped (docs/checkpoint.md).
//
// # Errors and memory
//
// nn follows cgotorch's policy: tensor math (Forward, losses) panics with a *cgotorch.Error on
// wrong shapes (cgotorch.Try turns that into an error); constructors from data, optimizers'
// Step and the state files return errors. Modules and optimizers need no Close: their tensors
// are released by cgotorch's cleanups, and a training loop may create every temporary without
// freeing it, or run each step in cgotorch.WithScope. In the latter case create the model and
// the optimizer (which allocates its state when parameters are added) outside the scope.
package nn
