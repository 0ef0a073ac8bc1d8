"""Step 1 of the data flow: a YAML spec (or a dictionary) read into checked, immutable descriptions."""

from .load import load_spec, parse_spec, spec_from_dict
from .limits import MAX_CASES, MAX_SPEC_BYTES
from .model import (DEFAULT_SPEC, PRECISIONS, Argument, KernelSpec, MeasureSettings, Shape, Spec, VerifySettings,
                    parse_shape_text)

__all__ = ["Argument", "DEFAULT_SPEC", "KernelSpec", "MAX_CASES", "MAX_SPEC_BYTES", "MeasureSettings", "PRECISIONS",
           "Shape", "Spec", "VerifySettings", "load_spec", "parse_shape_text", "parse_spec", "spec_from_dict"]
