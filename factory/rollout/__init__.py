"""``factory rollout``: run a policy on a real target and record its trajectories (the loop's first and last step).

``engine`` schedules (task, trial) episodes over target runners; ``load`` turns a ``--policy`` spec into one of
``policies`` (or ``hf``), which turn messages into actions; ``store`` is the resumable output folder; ``summary`` the numbers.
"""

from factory.rollout.engine import Rollout, RolloutConfig, run_rollout
from factory.rollout.load import load_policy
from factory.rollout.policies import Policy, PolicyError
from factory.rollout.summary import RolloutSummary

__all__ = ["Policy", "PolicyError", "Rollout", "RolloutConfig", "RolloutSummary", "load_policy", "run_rollout"]
