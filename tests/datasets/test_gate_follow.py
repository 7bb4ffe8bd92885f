"""The label gate on a moving camera: the prediction moved with the image, the fit held to the ground.

:func:`follow_camera` is checked against image pairs warped by a known similarity (OpenCV's
``warpAffine``), with and without a distractor moving its own way beside the robot; the fitter's up
direction and ground following are checked to reach the tracker it drives, frame by frame.
"""
import cv2
import numpy as np
import pytest

from snaketrack.errors import InputError
from snaketrack.labelling.fit_labels import LabelFitter
from snaketrack.labelling.label_gate import GateConfig, follow_camera, moved
from snaketrack.models.robot import load_robot
from snaketrack.tracker.calib.camera import Camera


def _texture(h=240, w=320, seed=0):
    rng = np.random.default_rng(seed)
    img = (rng.random((h, w)) * 255).astype(np.uint8)
    return cv2.GaussianBlur(img, (7, 7), 2.0)


def _band(h=240, w=320):
    sil = np.zeros((h, w), bool)
    sil[115:127, 60:260] = True
    return sil


@pytest.mark.parametrize("angle_deg, scale, shift", [(0.0, 1.0, (7.0, -4.0)), (2.0, 1.03, (-3.0, 5.0))])
def test_follow_camera_recovers_a_known_similarity(angle_deg, scale, shift):
    a = _texture()
    true = cv2.getRotationMatrix2D((160.0, 120.0), angle_deg, scale)
    true[:, 2] += shift
    b = cv2.warpAffine(a, true, (a.shape[1], a.shape[0]), borderMode=cv2.BORDER_REFLECT)
    got = follow_camera(a, b, _band())
    assert got is not None
    pts = np.array([[60.0, 115.0, 1.0], [260.0, 127.0, 1.0], [160.0, 121.0, 1.0]])
    err = np.abs(pts @ got.T - pts @ true.T).max()
    assert err < 0.5, (got, true)


def test_a_distractor_moving_its_own_way_does_not_move_the_prediction():
    a = _texture()
    b = np.roll(a, (0, 6), axis=(0, 1))        # the floor moved 6 px right
    leg = np.zeros_like(a, bool)
    leg[40:110, 120:180] = True                # a leg beside the robot, moved 20 px up instead
    b[leg] = np.roll(a, (-20, 0), axis=(0, 1))[leg]
    got = follow_camera(a, b, _band())
    assert got is not None
    np.testing.assert_allclose(got[:, 2], [6.0, 0.0], atol=0.5)
    np.testing.assert_allclose(got[:, :2], np.eye(2), atol=0.02)


def test_no_texture_gives_no_motion_and_moved_moves_a_mask():
    flat = np.full((120, 160), 90, np.uint8)
    sil = np.zeros((120, 160), bool)
    sil[50:60, 30:130] = True
    assert follow_camera(flat, flat, sil) is None
    A = np.array([[1.0, 0.0, 5.0], [0.0, 1.0, -2.0]])
    np.testing.assert_array_equal(moved(sil, A), np.roll(sil, (-2, 5), axis=(0, 1)))


def test_gate_config_checks_follow_px():
    with pytest.raises(InputError, match="follow_px"):
        GateConfig(follow_px=-1)


def _camera():
    K = np.array([[300.0, 0.0, 159.5], [0.0, 300.0, 119.5], [0.0, 0.0, 1.0]])
    return Camera(K, 320, 240)


def test_the_fit_gets_the_up_direction_and_the_ground_of_each_frame(monkeypatch):
    robot = load_robot("planar-snake-11")
    asked = []

    def up_source(i):
        asked.append(i)
        return np.array([0.0, -np.cos(0.3), -np.sin(0.3)])

    fitter = LabelFitter(robot, _camera(), 30.0, up_source=up_source, track_ground=True)
    assert fitter.tracker.config.ground_window == -1  # the base is held to the ground it follows
    seen = []

    class Stop(Exception):
        pass

    def start(label, **kw):
        seen.append(kw)
        raise Stop

    monkeypatch.setattr(fitter.tracker, "start", start)
    label = np.zeros((240, 320), bool)
    label[110:130, 40:280] = True
    frame = np.dstack([_texture()] * 3)
    with pytest.raises(Stop):
        fitter(label, frame, index=7)
    assert asked == [7]
    np.testing.assert_allclose(seen[0]["up"], up_source(7))
    assert seen[0]["ground"] == 1.0  # the first frame is the ground tracker's reference


def test_following_the_ground_needs_an_up_direction():
    with pytest.raises(InputError, match="needs the up direction"):
        LabelFitter(load_robot("planar-snake-11"), _camera(), 30.0, track_ground=True)
