"""Launch attributes beyond grid and block: thread-block clusters, their scheduling, programmatic dependent launch,
and cooperative launches (a grid whose blocks may all wait for each other: cooperative_groups' ``grid.sync()``).

A launch with any goes through ``cuLaunchKernelEx`` with a ``CUlaunchConfig``; one with none keeps
the plain ``cuLaunchKernel`` path. `LaunchAttributes.problems` checks all that can be checked
without a GPU, so `plan` refuses an impossible cluster at the spec's line before compiling; the
driver's ``cuOccupancyMaxActiveClusters`` cross-checks at load time. More: docs/hopper.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

# Cluster sizes (blocks per cluster) the CUDA programming guide calls portable: every
# GPU that supports clusters runs up to 8; Hopper runs up to 16 for a kernel that opts in
# (CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED).
PORTABLE_CLUSTER_SIZE = 8
NON_PORTABLE_CLUSTER_SIZE = 16
CLUSTER_ARCH_MIN = 90
SCHEDULING_POLICIES = ("default", "spread", "load_balancing")


class LaunchProblem(NamedTuple):
    """One refusal of `LaunchAttributes.problems`: the spec's `field` it is said at, what the launch would do
    (`message`), and the way out where there is one (`hint`)."""

    field: str
    message: str
    hint: str | None = None


@dataclass(frozen=True)
class LaunchAttributes:
    """What a launch asks for beyond its grid, block and shared memory.

    `cluster` is the cluster's extent in blocks (x, y, z); `non_portable`
    allows clusters above 8 blocks where the GPU has them;
    `programmatic_dependent_launch` lets a launch start while the previous
    kernel on its stream finishes (the kernel must wait with
    ``griddepcontrol.wait`` before reading what that kernel wrote);
    `cluster_scheduling` is the placement preference for the clusters;
    `cooperative` launches the grid so that all its blocks are resident at
    once and the driver gives it the workspace a grid-wide barrier needs
    (the driver refuses a grid larger than fits).
    """

    cluster: tuple[int, int, int] | None = None
    non_portable: bool = False
    programmatic_dependent_launch: bool = False
    cluster_scheduling: str | None = None
    cooperative: bool = False

    @property
    def any(self) -> bool:
        """True when the launch needs cuLaunchKernelEx."""
        return bool(self.cluster or self.programmatic_dependent_launch or self.cluster_scheduling or self.cooperative)

    @property
    def cluster_size(self) -> int:
        if not self.cluster:
            return 1
        x, y, z = self.cluster
        return x * y * z

    def problems(self, grid: tuple[int, int, int], shared_per_block: int, arch_number: int,
                 max_shared_per_sm: int | None = None) -> list[LaunchProblem]:
        """Offline checks as `LaunchProblem`s: sizes, divisibility of the grid, the architecture, shared memory.

        `arch_number` is the compute capability as a number (90 for sm_90). A refusal of the cluster names what
        the launch would do, and its `hint` the way out.
        """
        found: list[LaunchProblem] = []
        if self.cluster_scheduling is not None and self.cluster_scheduling not in SCHEDULING_POLICIES:
            found.append(LaunchProblem("cluster_scheduling", f"unknown cluster scheduling policy "
                                                             f"{self.cluster_scheduling!r}",
                                       f"one of {', '.join(SCHEDULING_POLICIES)}"))
        if self.programmatic_dependent_launch and arch_number < CLUSTER_ARCH_MIN:
            found.append(LaunchProblem("pdl", f"programmatic dependent launch needs sm_90 or newer, not "
                                              f"sm_{arch_number}"))
        if not self.cluster:
            if self.non_portable or self.cluster_scheduling:
                found.append(LaunchProblem("cluster", "cluster options without a cluster",
                                           "give cluster: [x, y, z], or drop the cluster options"))
            return found
        if arch_number < CLUSTER_ARCH_MIN:
            found.append(LaunchProblem("cluster", f"thread-block clusters need sm_90 or newer, not sm_{arch_number}: "
                                                  "a launch with a cluster fails on such a GPU",
                                       "plan for sm_90 or newer, --arch sm_90, or drop cluster: and the cluster "
                                       "options from the kernel"))
        if any(extent < 1 for extent in self.cluster):
            found.append(LaunchProblem("cluster", f"cluster extents must be at least 1, got {list(self.cluster)}"))
            return found
        limit = NON_PORTABLE_CLUSTER_SIZE if self.non_portable else PORTABLE_CLUSTER_SIZE
        if self.cluster_size > limit:
            hint = (f"at most {NON_PORTABLE_CLUSTER_SIZE} blocks a cluster" if self.non_portable else
                    f"at most {PORTABLE_CLUSTER_SIZE} blocks a cluster, or up to {NON_PORTABLE_CLUSTER_SIZE} with "
                    "cluster_non_portable: true, where the GPU allows it")
            found.append(LaunchProblem("cluster", f"a cluster of {self.cluster_size} blocks "
                                                  f"({' x '.join(map(str, self.cluster))}) is over the "
                                                  f"{'non-portable' if self.non_portable else 'portable'} limit of "
                                                  f"{limit}: the launch would fail with "
                                                  "CUDA_ERROR_INVALID_CLUSTER_SIZE", hint))
        for axis, (blocks, extent) in enumerate(zip(grid, self.cluster)):
            if blocks % extent:
                found.append(LaunchProblem("cluster", f"grid {'xyz'[axis]} = {blocks} blocks is not a multiple of "
                                                      f"the cluster's {extent}: the launch would fail with "
                                                      "CUDA_ERROR_INVALID_CLUSTER_SIZE",
                                           "the grid's extents must be multiples of the cluster's"))
        if max_shared_per_sm is not None and shared_per_block > max_shared_per_sm:
            found.append(LaunchProblem("cluster", f"{shared_per_block} bytes of shared memory per block do not fit "
                                                  f"one SM ({max_shared_per_sm}), so no cluster can be placed"))
        return found

    def as_dict(self) -> dict[str, Any]:
        return {"cluster": list(self.cluster) if self.cluster else None, "non_portable": self.non_portable,
                "programmatic_dependent_launch": self.programmatic_dependent_launch,
                "cluster_scheduling": self.cluster_scheduling, "cooperative": self.cooperative}

    def driver_attributes(self, driver) -> list:
        """The ``CUlaunchAttribute`` array for cuLaunchKernelEx (built without a GPU)."""
        attribute_id = driver.CUlaunchAttributeID
        out = []
        if self.cluster:
            item = driver.CUlaunchAttribute()
            item.id = attribute_id.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            item.value.clusterDim.x, item.value.clusterDim.y, item.value.clusterDim.z = self.cluster
            out.append(item)
        if self.cluster_scheduling:
            item = driver.CUlaunchAttribute()
            item.id = attribute_id.CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE
            item.value.clusterSchedulingPolicyPreference = getattr(
                driver.CUclusterSchedulingPolicy, f"CU_CLUSTER_SCHEDULING_POLICY_{self.cluster_scheduling.upper()}")
            out.append(item)
        if self.programmatic_dependent_launch:
            item = driver.CUlaunchAttribute()
            item.id = attribute_id.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
            item.value.programmaticStreamSerializationAllowed = 1
            out.append(item)
        if self.cooperative:
            item = driver.CUlaunchAttribute()
            item.id = attribute_id.CU_LAUNCH_ATTRIBUTE_COOPERATIVE
            item.value.cooperative = 1
            out.append(item)
        return out


def launch_config(driver, grid, block, shared_bytes: int, stream_handle, attributes: LaunchAttributes):
    """A ``CUlaunchConfig`` for cuLaunchKernelEx and cuOccupancyMaxActiveClusters."""
    config = driver.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = grid
    config.blockDimX, config.blockDimY, config.blockDimZ = block
    config.sharedMemBytes = shared_bytes
    config.hStream = stream_handle
    items = attributes.driver_attributes(driver)
    config.attrs = items
    config.numAttrs = len(items)
    return config
