"""``snaketrack calibrate``: chessboard views drawn with a known camera give back its intrinsics.

Each view is the board's texture warped by the homography ``K [r1 r2 t]`` of a known board pose,
drawn at twice the size and averaged down (anti-aliased edges), so the true K is exact.
"""
import json

import cv2
import numpy as np
import pytest

from snaketrack import cli
from snaketrack.tracker.calib.camera import load_calibration, source_camera

W, H = 640, 480
K_TRUE = np.array([[610.0, 0, 322.3], [0, 604.0, 236.8], [0, 0, 1]])
BOARD = (9, 6)  # inner corners
SQUARE_M = 0.025
TEX_PX = 80  # texture pixels per square
# (rx, ry, rz) [deg] of the board and its centre's offset (dx, dy) [m] and distance z [m]
POSES = [(0, 0, 0, 0.0, 0.0, 0.55), (30, 0, 0, 0.02, 0.0, 0.6), (-30, 0, 5, -0.02, 0.01, 0.6),
         (0, 30, 0, 0.0, 0.02, 0.6), (0, -30, -5, 0.01, -0.02, 0.6), (20, 20, 10, 0.04, 0.03, 0.65),
         (-20, 25, -10, -0.04, 0.02, 0.6), (25, -20, 5, 0.03, -0.03, 0.6), (-25, -25, 15, -0.03, -0.02, 0.65),
         (15, 0, -20, 0.05, 0.0, 0.55), (0, -15, 30, -0.05, 0.02, 0.6), (35, 10, 0, 0.0, 0.0, 0.7)]


def _texture() -> np.ndarray:
    """The board of (9+1) x (6+1) squares with one white square of margin all round, uint8 (9·TEX_PX, 12·TEX_PX)."""
    cols, rows = BOARD[0] + 1, BOARD[1] + 1
    tex = np.full(((rows + 2) * TEX_PX, (cols + 2) * TEX_PX), 255, np.uint8)
    for r in range(rows):
        for c in range(cols):
            if (r + c) % 2 == 0:
                y, x = (r + 1) * TEX_PX, (c + 1) * TEX_PX
                tex[y:y + TEX_PX, x:x + TEX_PX] = 0
    return tex


def _view(tex: np.ndarray, pose) -> np.ndarray:
    """One grey view (H, W) uint8 of the board at ``pose`` through K_TRUE."""
    rx, ry, rz, dx, dy, z = pose
    R = cv2.Rodrigues(np.radians([rx, ry, rz]))[0] @ np.eye(3)
    centre = np.array([tex.shape[1], tex.shape[0]]) / TEX_PX * SQUARE_M / 2  # board-plane centre [m]
    t = np.array([dx, dy, z]) - R @ np.array([centre[0], centre[1], 0.0])
    s = 2  # draw at twice the size: K of the big image keeps pixel centres consistent
    K2 = K_TRUE.copy()
    K2[:2, :2] *= s
    K2[:2, 2] = s * (K_TRUE[:2, 2] + 0.5) - 0.5
    img_from_plane = K2 @ np.column_stack([R[:, 0], R[:, 1], t])
    m = SQUARE_M / TEX_PX  # texture pixel centre i is at (i + 0.5)·m on the board plane
    plane_from_tex = np.array([[m, 0, 0.5 * m], [0, m, 0.5 * m], [0, 0, 1]])
    big = cv2.warpPerspective(tex, img_from_plane @ plane_from_tex, (s * W, s * H), flags=cv2.INTER_LINEAR,
                              borderMode=cv2.BORDER_CONSTANT, borderValue=128)
    return cv2.resize(big, (W, H), interpolation=cv2.INTER_AREA)


@pytest.fixture(scope="module")
def views(tmp_path_factory):
    d = tmp_path_factory.mktemp("views")
    tex = _texture()
    rng = np.random.default_rng(0)
    for i, pose in enumerate(POSES):
        img = _view(tex, pose).astype(float) + rng.normal(0, 2.0, (H, W))
        cv2.imwrite(str(d / f"view{i:02d}.png"), np.clip(img, 0, 255).astype(np.uint8))
    return d


def _main(args, capsys):
    code = cli.main([str(a) for a in args])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_calibrate_recovers_the_known_camera_and_the_tracker_reads_the_file(views, tmp_path, capsys, recwarn):
    out = tmp_path / "cam" / "camera.yaml"
    code, stdout, err = _main(["calibrate", views, "--board", "9x6", "--square-mm", "25", "--out", out], capsys)
    assert code == 0, err
    assert f"found in {len(POSES)} of {len(POSES)} images" in stdout and "RMS reprojection error" in stdout
    cam = load_calibration(out)
    assert cam.size == (W, H)
    for got, want in ((cam.fx, K_TRUE[0, 0]), (cam.fy, K_TRUE[1, 1]), (cam.cx, K_TRUE[0, 2]), (cam.cy, K_TRUE[1, 2])):
        assert abs(got - want) / want < 0.01, (got, want)
    assert np.abs(cam.dist[:2]).max() < 0.05 and cam.dist[4] == 0  # no distortion drawn; k3 held at 0
    # the tracker's loader takes it as --intrinsics, scaled to another video size
    half = source_camera({}, W // 2, H // 2, str(out))
    np.testing.assert_allclose(half.K, cam.resized(W // 2, H // 2).K)
    assert not list(out.parent.glob(".*"))  # no temporary file left
    assert not [w for w in recwarn if "calibration:" in str(w.message)]  # a plausible camera


def test_a_calibration_no_camera_could_have_is_written_with_a_warning(views, tmp_path, capsys, monkeypatch):
    """The views a user gives may not fix the camera: fx and fy far apart are kept, and said."""
    from snaketrack.errors import SnaketrackWarning

    real = cv2.calibrateCamera

    def skewed(*args, **kwargs):
        rms, K, dist, rvecs, tvecs = real(*args, **kwargs)
        K = K.copy()
        K[0, 0] *= 2.5
        return rms, K, dist, rvecs, tvecs

    monkeypatch.setattr(cv2, "calibrateCamera", skewed)
    out = tmp_path / "camera.yaml"
    with pytest.warns(SnaketrackWarning, match=r"differ by 15\d %.*do not pin the camera down") as seen:
        code, _, err = _main(["calibrate", views, "--board", "9x6", "--square-mm", "25", "--out", out], capsys)
    assert code == 0 and out.is_file() and len(seen) == 1, err


def test_calibrate_json_from_files_and_a_video(views, tmp_path, capsys):
    files = sorted(views.glob("*.png"))
    video = tmp_path / "board.avi"
    wr = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 10.0, (W, H))
    for f in files:
        wr.write(cv2.cvtColor(cv2.imread(str(f), cv2.IMREAD_GRAYSCALE), cv2.COLOR_GRAY2BGR))
    wr.release()
    out = tmp_path / "camera.json"
    code, stdout, err = _main(["calibrate", *files[:3], video, "--every", "2", "--board", "9x6", "--out", out,
                               "--json"], capsys)
    assert code == 0, err
    rep = json.loads(stdout)
    assert rep["tried"] == 3 + len(POSES) // 2 and rep["found"] == rep["tried"]
    cam = load_calibration(out)
    assert abs(cam.fx - K_TRUE[0, 0]) / K_TRUE[0, 0] < 0.02
    assert json.loads(out.read_text())["images_used"] == rep["found"]


def test_calibrate_one_line_errors(views, tmp_path, capsys):
    out = tmp_path / "camera.yaml"
    blank = tmp_path / "blank"
    blank.mkdir()
    for i in range(2):
        cv2.imwrite(str(blank / f"{i}.png"), np.full((H, W), 128, np.uint8))
    cases = [
        (["calibrate", blank, "--board", "9x6", "--out", out], "found in 0 of 2 images; expected at least 3"),
        (["calibrate", views, "--board", "9by6", "--out", out], "--board '9by6'; expected COLSxROWS"),
        (["calibrate", views, "--board", "1x6", "--out", out], "--board '1x6'"),
        (["calibrate", tmp_path / "nope.png", "--board", "9x6", "--out", out], "nope.png: no such image"),
        (["calibrate", views, "--board", "9x6", "--out", tmp_path / "camera.txt"], "--out"),
    ]
    for args, words in cases:
        code, _, err = _main(args, capsys)
        assert code == 2, args
        assert err.startswith("snaketrack: error: ") and err.count("\n") == 1 and words in err, err
    assert not out.exists()


def test_a_board_only_in_some_images_is_calibrated_from_those(views, tmp_path, capsys):
    """A wrong board size finds nothing; images without the board are skipped, not fatal."""
    files = sorted(views.glob("*.png"))[:4]
    blank = tmp_path / "blank.png"
    cv2.imwrite(str(blank), np.full((H, W), 200, np.uint8))
    out = tmp_path / "c.yaml"
    code, stdout, err = _main(["calibrate", *files, blank, "--board", "9x6", "--out", out], capsys)
    assert code == 0, err
    assert "found in 4 of 5 images" in stdout
    code, _, err = _main(["calibrate", *files, "--board", "8x6", "--out", out], capsys)
    assert code == 2 and "found in 0 of 4 images" in err
