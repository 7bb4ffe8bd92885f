"""The robot's silhouette: its primitives, the renderers (own and PyTorch3D) and their derivatives."""
