"""aneforge: build a lazy tensor graph with NumPy-style calls (``af.input``, ``x.relu()``,
``x @ W``, ``af.conv`` ...), then ``af.compile`` it into one Apple Neural Engine program — MIL
text plus a weight blob in a content-addressed program directory — and call the returned
``Model`` on NumPy arrays. On the ANE the program runs through Espresso's e5rt API; anywhere
else (Linux, Intel Macs, CI) it runs on the reference executor, a CPU interpreter that defines
every op under the fp16 contract (each op's output rounded to fp16; ``precision="fp32"``
skips the rounding). ``model.device`` always says which executor ran it.
"""

from aneforge._core import (
    Model,
    Tensor,
    __version__,
    batch_norm,
    compile,
    concat,
    constant,
    conv,
    conv_transpose,
    crop,
    cross_attention,
    depth_to_space,
    dynamic_conv,
    export,
    gather,
    geglu,
    image_input,
    input,
    instance_norm,
    maximum,
    mha,
    minimum,
    pixel_shuffle,
    pixel_unshuffle,
    preflight,
    resize_bilinear,
    resize_nearest_neighbor,
    sdpa,
    select,
    space_to_depth,
    split,
    stack,
    upsample_bilinear,
)
from aneforge._core import Encoder, ResNet
from aneforge.models import load, load_resnet, load_resnet18, load_resnet34, load_resnet50

__all__ = [
    "Encoder",
    "Model",
    "ResNet",
    "Tensor",
    "__version__",
    "batch_norm",
    "compile",
    "concat",
    "constant",
    "conv",
    "conv_transpose",
    "crop",
    "cross_attention",
    "depth_to_space",
    "dynamic_conv",
    "export",
    "gather",
    "geglu",
    "image_input",
    "input",
    "instance_norm",
    "load",
    "load_resnet",
    "load_resnet18",
    "load_resnet34",
    "load_resnet50",
    "maximum",
    "mha",
    "minimum",
    "pixel_shuffle",
    "pixel_unshuffle",
    "preflight",
    "resize_bilinear",
    "resize_nearest_neighbor",
    "sdpa",
    "select",
    "space_to_depth",
    "split",
    "stack",
    "upsample_bilinear",
    "where",
]

#: Alias of select (the numpy.where spelling).
where = select
