"""Our envs in other RL stacks, one thin module per framework over what the trainer already does.

``integrations.trl``: a ``rollout_func`` (and reward and dataset) for TRL's ``GRPOTrainer``.
``integrations.verifiers``: a verifiers ``MultiTurnEnv`` over a registered env (the ``verifiers`` extra).
Gymnasium needs no module here: ``gym.make``, ``gym.make_vec`` and pickling work on the envs themselves.
Top layer, beside ``factory``: may import ``trainer`` and ``env_registry``; nothing imports it.
"""
