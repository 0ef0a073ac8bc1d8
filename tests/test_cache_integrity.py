"""The disk cache serves an image only for the very compile it was made by: every local header the source can
include is in the key (two headers of one name in two folders, both), a source that names a header through a
macro is not cached, and an entry is believed only when it is a regular file of bounded size whose header names
its key and whose image holds every instance asked for."""

import os
import shutil

import pytest

from driver_gemm.cuda import cache
from driver_gemm.cuda.compile import compile_source
from driver_gemm.errors import CompileError

from test_header_containment import deadline

KERNEL = "__global__ void {name}(int* c) {{ c[0] = VALUE; }}\n"


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("DRIVER_GEMM_CACHE_DIR", str(folder))
    return folder


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text("")
    return root


def entries(folder) -> set:
    return set(folder.rglob("*.cubin"))


def test_a_second_header_of_one_name_in_another_folder_is_in_the_key(project, cache_dir):
    for side, value in (("a", 1), ("b", 2)):
        (project / side).mkdir()
        (project / side / "common.h").write_text('#include "util.h"\n')
        (project / side / "util.h").write_text(f"#define VALUE_{side.upper()} {value}\n")
    path = project / "k.cu"
    path.write_text('#include "a/common.h"\n#include "b/common.h"\n#define VALUE (VALUE_A + VALUE_B)\n'
                    + KERNEL.format(name="k"))
    assert not compile_source(path, ["k"]).from_cache
    assert compile_source(path, ["k"]).from_cache
    (project / "b" / "util.h").write_text('#error "b/util.h changed"\n')
    with pytest.raises(CompileError, match="b/util.h changed"):
        compile_source(path, ["k"])


def test_a_header_named_through_a_macro_is_keyed_as_the_file_its_define_names(project, cache_dir):
    (project / "m.h").write_text("#define VALUE 1\n")
    path = project / "k.cu"
    path.write_text('#define HEADER "m.h"\n#include HEADER\n' + KERNEL.format(name="k"))
    assert not compile_source(path, ["k"]).from_cache
    assert compile_source(path, ["k"]).from_cache
    (project / "m.h").write_text('#error "m.h changed"\n')
    with pytest.raises(CompileError, match="m.h changed"):
        compile_source(path, ["k"])


def test_a_header_a_macro_names_elsewhere_is_never_served_from_the_cache(project, cache_dir):
    # -DHEADER="m.h": the file is picked on the command line, so no key can hold it (and the user allowed it)
    (project / "m.h").write_text("#define VALUE 1\n")
    path = project / "k.cu"
    path.write_text("#include HEADER\n" + KERNEL.format(name="k"))
    options = ['-DHEADER="m.h"']
    assert not compile_source(path, ["k"], "sm_90", options, allow_outside_headers=True).from_cache
    assert not compile_source(path, ["k"], "sm_90", options, allow_outside_headers=True).from_cache


def two_kernels(project, cache_dir):
    """Kernel `first` compiled and cached, then kernel `second` (another source); their entries' paths."""
    (project / "v.h").write_text("#define VALUE 1\n")
    for name in ("first", "second"):
        (project / f"{name}.cu").write_text('#include "v.h"\n' + KERNEL.format(name=name))
    compile_source(project / "first.cu", ["first"])
    first, = entries(cache_dir)
    compile_source(project / "second.cu", ["second"])
    second, = entries(cache_dir) - {first}
    return first, second


def recompiled(project):
    cubin = compile_source(project / "first.cu", ["first"])
    assert not cubin.from_cache and cubin.symbol("first")
    return cubin


def test_an_entry_swapped_for_another_kernels_entry_is_ignored_and_rebuilt(project, cache_dir):
    first, second = two_kernels(project, cache_dir)
    shutil.copyfile(second, first)
    recompiled(project)
    assert compile_source(project / "first.cu", ["first"]).from_cache   # rewritten by the rebuild


def test_an_entry_holding_another_kernels_image_under_a_recomputed_checksum_is_ignored(project, cache_dir):
    first, second = two_kernels(project, cache_dir)
    header, _ = cache._decode(cache.read_entry(first, cache._MAGIC))
    _, foreign = cache._decode(cache.read_entry(second, cache._MAGIC))
    cache.write_entry(first, cache._MAGIC, cache._encode(header, foreign))
    recompiled(project)


def test_an_entry_whose_header_lacks_the_instance_is_ignored_instead_of_raising_key_error(project, cache_dir):
    first, _ = two_kernels(project, cache_dir)
    header, image = cache._decode(cache.read_entry(first, cache._MAGIC))
    cache.write_entry(first, cache._MAGIC, cache._encode({**header, "lowered_names": {}}, image))
    recompiled(project)


@pytest.mark.parametrize("garbage", [os.urandom(4096), b"\x00" * 16, b"{}", b""], ids=["random", "zeros", "json", "empty"])
def test_garbage_under_a_recomputed_checksum_is_ignored_and_rebuilt(project, cache_dir, garbage):
    first, _ = two_kernels(project, cache_dir)
    cache.write_entry(first, cache._MAGIC, garbage)
    recompiled(project)


def test_a_fifo_entry_does_not_hang_and_is_rebuilt(project, cache_dir):
    first, _ = two_kernels(project, cache_dir)
    first.unlink()
    os.mkfifo(first)
    with deadline():
        recompiled(project)


def test_an_entry_linked_to_dev_zero_is_not_read(project, cache_dir):
    first, _ = two_kernels(project, cache_dir)
    first.unlink()
    first.symlink_to("/dev/zero")
    with deadline():
        recompiled(project)
    assert cache.read_entry(cache_dir / "absent.cubin", cache._MAGIC) is None


def test_an_oversized_entry_is_not_read(tmp_path):
    with open(tmp_path / "huge.cubin", "wb") as huge:
        huge.truncate(cache.MAX_ENTRY_BYTES + 1)
    assert cache.read_entry(tmp_path / "huge.cubin", cache._MAGIC) is None


def rewritten_header(entry, change) -> None:
    """`entry`'s header changed by `change` (a function of the header), its checksum made right again."""
    header, image = cache._decode(cache.read_entry(entry, cache._MAGIC))
    change(header)
    cache.write_entry(entry, cache._MAGIC, cache._encode(header, image))


def _registers_many(header) -> None:
    for counts in header["resources"].values():
        counts["registers"] = "many"


def _grid_sync_as_text(header) -> None:
    header["ptx_facts"] = {symbol: {**facts, "grid_sync": "false"} for symbol, facts in header["ptx_facts"].items()}


@pytest.mark.parametrize("change", [
    _registers_many,
    _grid_sync_as_text,
    lambda header: header.update(options="-O3"),
    lambda header: header.update(nvrtc_version=["13", "1"]),
    lambda header: header.update(compile_seconds=None),
], ids=["registers", "ptx-facts", "options", "nvrtc-version", "seconds"])
def test_a_header_of_the_wrong_types_under_a_recomputed_checksum_is_ignored_and_rebuilt(project, cache_dir, change):
    # as another version of the package, or a hand-copied entry, could leave: planning would otherwise meet a
    # register count of "many" far from the cache
    first, _ = two_kernels(project, cache_dir)
    rewritten_header(first, change)
    recompiled(project)
    assert compile_source(project / "first.cu", ["first"]).from_cache   # rewritten by the rebuild


@pytest.mark.parametrize("kind", ["folder", "fifo", "dangling link"])
def test_an_entry_that_is_not_a_file_is_replaced_without_a_warning_about_the_cache(project, cache_dir, kind, caplog):
    first, _ = two_kernels(project, cache_dir)
    first.unlink()
    {"folder": first.mkdir, "fifo": lambda: os.mkfifo(first),
     "dangling link": lambda: first.symlink_to(cache_dir / "nothing-here")}[kind]()
    with deadline():
        recompiled(project)
    assert first.is_file() and not first.is_symlink()
    assert compile_source(project / "first.cu", ["first"]).from_cache
    assert not [record for record in caplog.records if record.levelname == "WARNING"], caplog.text


def test_an_entry_that_is_a_folder_holding_files_is_one_warning_naming_the_entry(project, cache_dir, caplog,
                                                                              monkeypatch):
    monkeypatch.setattr(cache, "_stuck_entries", set())     # as in a new process
    first, _ = two_kernels(project, cache_dir)
    first.unlink()
    first.mkdir()
    (first / "kept.txt").write_text("someone's file")
    recompiled(project)
    recompiled(project)
    warnings = [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]
    assert len(warnings) == 1, warnings
    assert f"the disk cache entry {first} is a folder and cannot be removed" in warnings[0]
    assert "DRIVER_GEMM_CACHE_DIR" not in warnings[0] and (first / "kept.txt").is_file()


KEY = "6c" + "0" * 62


@pytest.mark.parametrize("kind", ["loop of links", "dangling link", "file", *([] if os.geteuid() == 0 else
                                                                           ["folder of mode 000"])])
def test_an_entry_folder_that_is_no_usable_folder_is_made_again_without_a_warning(cache_dir, kind, caplog,
                                                                                  monkeypatch):
    monkeypatch.setattr(cache, "_unwritable_folders", set())     # as in a new process
    monkeypatch.setattr(cache, "_stuck_entries", set())
    shard = cache.path_for(KEY).parent
    cache_dir.mkdir()
    if kind == "loop of links":
        shard.symlink_to(shard.name)
    elif kind == "dangling link":
        shard.symlink_to(cache_dir / "nothing-here")
    elif kind == "file":
        shard.write_text("not a folder")
    else:
        shard.mkdir()
        shard.chmod(0)
    cache.write_entry(cache.path_for(KEY), cache._MAGIC, b"body")
    assert shard.is_dir() and not shard.is_symlink()
    assert cache.read_entry(cache.path_for(KEY), cache._MAGIC) == b"body"
    assert not [record for record in caplog.records if record.levelname == "WARNING"], caplog.text


def test_an_entry_that_cannot_be_written_is_one_warning_naming_it_and_the_other_folders_still_written(
        cache_dir, caplog, monkeypatch):
    monkeypatch.setattr(cache, "_unwritable_folders", set())     # as in a new process
    cache_dir.mkdir()
    target = cache.path_for(KEY)
    other = cache.path_for("ab" + "0" * 62)
    real_write = cache.write_file

    def refused_in_one_folder(path, data):
        if path.parent == target.parent:
            raise cache.OutputError(f"{path}: not written: permission denied")
        return real_write(path, data)

    monkeypatch.setattr(cache, "write_file", refused_in_one_folder)
    cache.write_entry(target, cache._MAGIC, b"body")
    cache.write_entry(target.with_name("6c" + "1" * 62 + ".cubin"), cache._MAGIC, b"body")
    cache.write_entry(other, cache._MAGIC, b"body")
    warnings = [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]
    assert len(warnings) == 1, warnings
    assert f"{target}: not written: permission denied" in warnings[0]
    assert "entries in the cache's other folders are still written" in warnings[0]
    assert "going on without it" not in warnings[0]
    assert cache.read_entry(other, cache._MAGIC) == b"body"


@pytest.mark.parametrize("value", ["relx", "./relx", "relx/sub"])
def test_a_relative_xdg_cache_home_is_ignored(value, tmp_path, monkeypatch):
    # The XDG Base Directory spec: a relative path there is invalid and is ignored (else each working folder
    # would get a cache of its own).
    monkeypatch.delenv("DRIVER_GEMM_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", value)
    assert cache.directory() == tmp_path / "home" / ".cache" / "driver-gemm"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.directory() == tmp_path / "xdg" / "driver-gemm"


@pytest.mark.parametrize("value", [" ", "\t", "  \n"])
def test_a_cache_dir_of_only_whitespace_is_as_unset_as_for_no_cache(value, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("DRIVER_GEMM_CACHE_DIR", value)
    monkeypatch.setenv("DRIVER_GEMM_NO_CACHE", value)
    assert cache.directory() == tmp_path / "home" / ".cache" / "driver-gemm"
    assert cache.enabled()
