"""Experiments that close the loop over the rest: a simulated world, the tracker, the service and the estimators.

They stand above every library package (they use the worlds of :mod:`snaketrack.sim`, the tracking service and
the Jacobian estimators together) and below the commands.

- :func:`run_closed_loop`: a MuJoCo robot steered to targets from the service's tracked states.
- :class:`HeadSteering`: the head steered by the estimated Jacobian.
- :func:`run_experiments`: the three experiments of the Jacobian paper on the MuJoCo world.
"""
from snaketrack._exports import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "ClosedLoopConfig": "closed_loop", "run_closed_loop": "closed_loop",
    "SteeringConfig": "steering", "HeadSteering": "steering",
    "ExperimentsConfig": "jacobian", "run_experiments": "jacobian",
})
