"""Worlds that move and know the truth: MuJoCo scenes, gaits, synthetic video, planar controllers.

- :func:`simulate_oal`: the obstacle-aided-locomotion world and its gait.
- :func:`write_oal_outputs`: one such run as ``states.csv``, ``summary.json`` and a head-path figure.
- :class:`VideoConfig` / :func:`render_video`: synthetic video with ground truth as a dataset folder.
- :func:`run_scenario`: planar dynamics with head or centre tracking and joint control.
"""
from snaketrack._exports import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "OALConfig": "oal", "simulate_oal": "oal", "write_oal_outputs": "oal_outputs",
    "Gait": "gait", "GaitParams": "gait",
    "VideoConfig": "video", "VideoRenderer": "video", "render_video": "video_dataset",
    "Degradation": "degrade", "degrade": "degrade",
    "PlanarScenario": "planar", "run_scenario": "planar",
    "build_world": "mjcf", "load_model": "mjcf",
})
