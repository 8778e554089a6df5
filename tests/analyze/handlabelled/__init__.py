"""A hand-labelled set of τ² airline and retail trajectories: conversations written on the real tasks, tool
results from the real databases, outcomes graded for real, and labels (with reasons) written by hand before the
offline rules were tuned. ``split`` marks the cases the rules were tuned on and those kept back."""
