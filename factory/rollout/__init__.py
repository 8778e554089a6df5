"""``factory rollout``: run a policy on a real target and record its trajectories (the loop's first and last step).

``engine`` schedules (task, trial) episodes over target runners; ``policies`` (and ``hf``) turn a
``--policy`` spec into actions; ``store`` is the resumable output folder; ``summary`` the numbers.
"""

from factory.rollout.engine import Rollout, RolloutConfig, run_rollout
from factory.rollout.policies import Policy, PolicyError, load_policy
from factory.rollout.summary import RolloutSummary

__all__ = ["Policy", "PolicyError", "Rollout", "RolloutConfig", "RolloutSummary", "load_policy", "run_rollout"]
