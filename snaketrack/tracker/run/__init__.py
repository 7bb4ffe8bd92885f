"""Running a track: the session, the frame loop, its outputs and quality figures."""
