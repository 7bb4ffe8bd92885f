"""Camera intrinsics: files, validation, resizing, undistortion (against OpenCV)."""
import json

import cv2
import numpy as np
import pytest
import torch

from snaketrack.errors import FileFormatError, InputError, MissingFileError, SnaketrackWarning
from snaketrack.tracker.calib.camera import (
    DEFAULT_FOV_DEG,
    Camera,
    FieldOfView,
    Undistorter,
    load_calibration,
    save_calibration,
    source_camera,
)

K = np.array([[520.0, 0, 318.2], [0, 515.0, 181.7], [0, 0, 1]])
DIST = np.array([-0.21, 0.05, 0.001, -0.0015, 0.01])


def test_from_meta_dict_file_and_folder(tmp_path):
    meta = {"K": K.tolist(), "width": 640, "height": 360, "fps": 30}
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    for src in (meta, tmp_path / "meta.json", tmp_path):
        cam = Camera.from_meta(src)
        np.testing.assert_array_equal(cam.K, K)
        assert cam.size == (640, 360) and cam.dist is None


def test_opencv_yaml_written_by_filestorage(tmp_path):
    p = str(tmp_path / "calib.yaml")
    fs = cv2.FileStorage(p, cv2.FILE_STORAGE_WRITE)
    fs.write("image_width", 640)
    fs.write("image_height", 360)
    fs.write("camera_matrix", K)
    fs.write("distortion_coefficients", DIST.reshape(1, 5))
    fs.release()
    cam = load_calibration(p)
    np.testing.assert_allclose(cam.K, K)
    np.testing.assert_allclose(cam.dist, DIST)
    assert cam.size == (640, 360)


@pytest.mark.parametrize("form", ["nested", "flat", "filestorage"])
def test_json_forms(tmp_path, form):
    if form == "filestorage":
        p = str(tmp_path / "c.json")
        fs = cv2.FileStorage(p, cv2.FILE_STORAGE_WRITE)
        fs.write("camera_matrix", K)
        fs.write("dist_coeffs", DIST)
        fs.release()
    else:
        p = tmp_path / "c.json"
        km = K.tolist() if form == "nested" else K.ravel().tolist()
        p.write_text(json.dumps({"camera_matrix": km, "dist_coeffs": DIST.tolist()}))
    cam = load_calibration(p, width=640, height=360)
    np.testing.assert_allclose(cam.K, K)
    np.testing.assert_allclose(cam.dist, DIST)


def test_save_load_round_trip_and_scaling_to_video_size(tmp_path):
    cam = Camera.from_K(K, 640, 360, DIST)
    for name in ("a.yaml", "b.json"):
        save_calibration(tmp_path / name, cam)
        back = load_calibration(tmp_path / name)
        np.testing.assert_allclose(back.K, cam.K)
        np.testing.assert_allclose(back.dist, cam.dist)
    big = load_calibration(tmp_path / "a.yaml", width=1280, height=720)
    np.testing.assert_allclose(big.K, cam.resized(1280, 720).K)


def test_resize_maps_pixel_centres_like_cv2_resize():
    """A point projected at full size lands, after cv2.resize by 1/2, where the resized K projects it."""
    cam = Camera.from_K(K, 640, 360)
    small = cam.resized(320, 180)
    np.testing.assert_allclose(small.fx, K[0, 0] / 2)
    img = np.zeros((360, 640), np.float32)
    # a 2x2 block centred at full-res (400.5, 120.5) -> exactly small pixel (200, 60)
    img[120:122, 400:402] = 1.0
    r = cv2.resize(img, (320, 180), interpolation=cv2.INTER_AREA)
    v, u = np.unravel_index(np.argmax(r), r.shape)
    X = np.array([(400.5 - K[0, 2]) / K[0, 0], (120.5 - K[1, 2]) / K[1, 1], 1.0])
    np.testing.assert_allclose(small.project(X)[0], [u, v], atol=1e-9)
    # projection agrees with cv2.projectPoints and the torch version
    pts = np.array([[0.1, -0.2, 2.0], [0.3, 0.1, 1.2]])
    ref, _ = cv2.projectPoints(pts, np.zeros(3), np.zeros(3), K, None)
    np.testing.assert_allclose(cam.project(pts), ref[:, 0], atol=1e-9)
    np.testing.assert_allclose(cam.project_torch(torch.as_tensor(pts)).numpy(), ref[:, 0], atol=1e-9)


def test_undistortion_against_undistort_points():
    cam = Camera.from_K(K, 640, 360, DIST)
    und = Undistorter(cam)
    assert und.output_camera.dist is None
    # a dot at a distorted location must appear where cv2.undistortPoints puts it
    img = np.zeros((360, 640), np.uint8)
    pd = np.array([[520.0, 300.0]])
    cv2.circle(img, (520, 300), 3, 255, -1)
    out = und.frame(img)
    m = cv2.moments(out)
    ideal = cv2.undistortPoints(pd.reshape(1, 1, 2), K, DIST, P=K)[0, 0]
    np.testing.assert_allclose([m["m10"] / m["m00"], m["m01"] / m["m00"]], ideal, atol=0.3)
    mask = img > 0
    um = und.mask(mask)
    assert um.dtype == bool and um.shape == mask.shape
    # also the same as cv2.undistort with the same new matrix
    ref = cv2.undistort(img, K, DIST, None, K)
    diff = np.abs(out.astype(int) - ref.astype(int))
    assert diff.mean() < 0.05 and diff.max() <= 8  # fixed-point vs float maps


def test_no_distortion_passes_through():
    cam = Camera.from_K(K, 640, 360, np.zeros(5))
    assert cam.dist is None
    img = np.random.default_rng(0).integers(0, 255, (360, 640, 3), dtype=np.uint8)
    assert Undistorter(cam).frame(img) is img
    with pytest.raises(InputError, match="640x360"):
        Undistorter(cam).frame(img[:100])


@pytest.mark.parametrize("bad, match", [
    ([[0, 0, 320], [0, 500, 180], [0, 0, 1]], "focal length"),
    ([[500, 0, 320], [0, -1, 180], [0, 0, 1]], "focal length"),
    ([[500, 0, 320], [0, 500, 180]], "shape"),
    ([[500, 0, 320], [0, 500, 180], [0, 1, 1]], "last row"),
    ([[500, 3, 320], [0, 500, 180], [0, 0, 1]], "skew"),
    ([[500, 0, np.nan], [0, 500, 180], [0, 0, 1]], "non-finite"),
])
def test_bad_intrinsics(bad, match):
    with pytest.raises(InputError, match=match):
        Camera.from_K(bad, 640, 360)


def test_bad_files(tmp_path):
    with pytest.raises(MissingFileError):
        load_calibration(tmp_path / "none.yaml")
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(FileFormatError, match="x.json"):
        load_calibration(tmp_path / "x.json", 640, 360)
    (tmp_path / "y.json").write_text(json.dumps({"dist_coeffs": [0, 0, 0, 0]}))
    with pytest.raises(FileFormatError, match="camera_matrix"):
        load_calibration(tmp_path / "y.json", 640, 360)
    (tmp_path / "z.json").write_text(json.dumps({"camera_matrix": K.tolist(), "dist_coeffs": [0.1, 0.2, 0.3]}))
    with pytest.raises(InputError, match="3 distortion coefficients"):
        load_calibration(tmp_path / "z.json", 640, 360)
    (tmp_path / "w.json").write_text(json.dumps({"camera_matrix": K.tolist()}))
    with pytest.raises(FileFormatError, match="image_width"):
        load_calibration(tmp_path / "w.json")
    (tmp_path / "bad.yaml").write_text("this: [is not\n  valid")
    with pytest.raises((FileFormatError, InputError)):
        load_calibration(tmp_path / "bad.yaml", 640, 360)
    with pytest.raises(FileFormatError, match="missing 'K'"):
        Camera.from_meta({"width": 640, "height": 360})


def test_a_field_of_view_puts_its_edge_rays_on_the_image_edges():
    cam = FieldOfView(68.0).camera(640, 360)
    x = 2.0 * np.tan(np.radians(34.0))  # the edge rays at depth 2 m
    uv = cam.project([[x, 0.0, 2.0], [-x, 0.0, 2.0], [0.0, 0.0, 2.0]])
    np.testing.assert_allclose(uv, [[639.5, 179.5], [-0.5, 179.5], [319.5, 179.5]], atol=1e-9)  # pixel edges
    assert cam.fx == cam.fy and cam.dist is None
    # a flag wins over the dataset's own K; without either a plain video gets a phone's field of view, said
    assert source_camera({"K": K.tolist()}, 640, 360, FieldOfView(68.0)).fx == cam.fx
    with pytest.warns(SnaketrackWarning, match="--fov-deg"):
        guess = source_camera({}, 640, 360)
    assert guess.fx == pytest.approx(320.0 / np.tan(np.radians(DEFAULT_FOV_DEG / 2))) and guess.cx == 319.5
    for bad in (0.0, 180.0, -5.0):
        with pytest.raises(InputError, match="field of view"):
            FieldOfView(bad)


def test_a_calibration_without_its_size_and_made_at_another_is_refused(tmp_path):
    """A 1280x720 calibration without image_width/image_height put the principal point in the corner of a
    640x360 video; with them its K is scaled to the video."""
    K = [[900.0, 0, 639.5], [0, 900.0, 359.5], [0, 0, 1]]
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps({"camera_matrix": K, "dist_coeffs": [0] * 5}))
    with pytest.raises(FileFormatError, match="another image size"):
        load_calibration(bare, 640, 360)
    assert load_calibration(bare, 1280, 720).K[0, 2] == pytest.approx(639.5)  # right for its own size
    sized = tmp_path / "sized.json"
    sized.write_text(json.dumps({"camera_matrix": K, "dist_coeffs": [0] * 5, "image_width": 1280,
                                 "image_height": 720}))
    cam = load_calibration(sized, 640, 360)
    assert (cam.K[0, 0], cam.K[0, 2], cam.K[1, 2]) == pytest.approx((450.0, 319.5, 179.5))
