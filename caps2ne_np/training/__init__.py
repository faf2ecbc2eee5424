"""Training, in two rooms and the run: the options of a run (options/), the step (step/:
the compiled step, the Python step, Adam, the samplers), and the run itself: the one
driver (trainer.py), the epoch loop (loop.py), the stop rules (budget.py),
checkpoints, progress, the schedule, and the engines that drive the step (train.py: this
process, sync or async threads; ray/: a Ray cluster; engines.py chooses)."""
