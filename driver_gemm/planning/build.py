"""Before any GPU work: every case planned once, the kernels worth compiling compiled, in parallel.

`plan_cases` evaluates every case's launch and, once `compile_spec` has built what can run (NVRTC,
nvcc or a prebuilt binary), completes each plan with its kernel's resources and checks the spec's
signature against the image's real parameters. Kernels no shape can launch are never compiled
(`refused_everywhere`). `check_offline` is the same check without a GPU, so that a spec's mistakes
are reported before a GPU is asked for.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
from collections.abc import Mapping
import os
import re
import types

from ..cuda import bounded
from ..cuda.compile import Cubin, compile_source, include_folders, local_headers, read_source
from ..cuda.compile_diagnostics import (params_by_position, plain_declarations, template_arguments_problem,
                                        template_parameter_names, template_parameters)
from .sizeof_values import known_type_sizes
from ..cuda.cubin import KernelImage
from ..cuda.mangling import demangle
from ..cuda.nvcc import compile_with_nvcc
from ..cuda.occupancy import ArchLimits, arch_limits
from ..cuda.prebuilt import load_binary
from ..cuda.signature_check import check_kernel_signature, launch_writes_output
from ..errors import CompileError, ConfigError, ImageError, SpecError
from ..measure.memory import host_total
from ..specfile.model import FollowingLaunch, KernelSpec, Spec
from .cases import Case, cases_of, kernels_of, kernels_on, member_problem
from .case_plan import (CasePlan, literal_grid_check, plan_launch, split_multiple_check, uncounted_matrices_check,
                        with_resources)
from .hopper_checks import cluster_use_checks
from .image_checks import compiled_cluster, facts_of, following_image_checks, image_checks
from .memory_plan import with_memory_check

Compiled = dict[str, "Cubin | CompileError"]


def launch_plans(spec: Spec, limits: ArchLimits) -> dict[tuple[str, str], CasePlan]:
    """Every kernel's launch plan on every shape, keyed by (kernel label, shape label); no compiler output needed.

    Each plan's memory is checked too (`memory_plan`): against this machine's physical memory and the
    largest GPU of the target architecture.
    """
    scalars = dict(spec.scalars)
    host = host_total()
    known_type_sizes(kernels_of(spec), limits.arch)   # one compile per program, not one per configuration
    return {(kernel.label, shape.label): with_member_check(spec, kernel, shape, with_template_order(with_memory_check(
                plan_launch(kernel, shape, limits, scalars, written_scalars=spec.written_scalars), host, limits.arch)))
            for shape in spec.shapes for kernel in kernels_on(spec, shape)}


def with_member_check(spec: Spec, kernel: KernelSpec, shape, plan: CasePlan) -> CasePlan:
    """`plan` refused, first of its problems, where a dispatch table picks `kernel` as a member on `shape` and it
    computes another GEMM than its family there (`cases.member_problem`)."""
    problem = member_problem(spec, kernel, shape) if spec.dispatch else None
    return dataclasses.replace(plan, problems=[problem, *plan.problems]) if problem is not None else plan


def with_template_order(plan: CasePlan) -> CasePlan:
    """`plan` refused at ``params`` where they name the template's parameters in another order
    (`params_out_of_template_order`). Checked before compiling: params of different kinds swapped
    (``{CHECKED: true, TILE: 16}`` for ``template <int TILE, bool CHECKED>``) make no instance at all, and the
    compiler's error would not say why; such a kernel is then not compiled (`CasePlan.refused_before_compiling`).
    Params passed by position under names of the spec's own are noted (`params_passed_by_position`)."""
    problems, notes = _template_order_problems(plan.kernel)
    if problems or notes:
        return dataclasses.replace(plan, problems=[*plan.problems, *problems], notes=[*plan.notes, *notes])
    return plan


# `params_out_of_template_order` and `params_passed_by_position` of each kernel, by its id, holding it so that the
# id stays its own: checked once per kernel, not once per case.
_ORDER_CHECKS: dict[int, tuple[KernelSpec, list[SpecError], list[str]]] = {}


def _template_order_problems(kernel: KernelSpec) -> tuple[list[SpecError], list[str]]:
    found = _ORDER_CHECKS.get(id(kernel))
    if found is None or found[0] is not kernel:
        if len(_ORDER_CHECKS) >= _IMAGE_CHECKS_KEPT:
            _ORDER_CHECKS.clear()
        found = _ORDER_CHECKS[id(kernel)] = (kernel, params_out_of_template_order(kernel),
                                             params_passed_by_position(kernel))
    return found[1], found[2]


def refused_everywhere(spec: Spec, limits: ArchLimits,
                       plans: dict[tuple[str, str], CasePlan] | None = None) -> set[str]:
    """Labels of the kernels whose launch checks fail on every shape before any compiler output is needed.

    A sweep's `require:` constraints often rule out configurations that the
    source cannot even instantiate (its static_asserts say the same thing):
    those are not compiled, and their cases are Status.INVALID with the constraint
    that failed rather than Status.ERROR with a compiler message. `plans` are
    those of `launch_plans`, when already made.
    """
    plans = launch_plans(spec, limits) if plans is None else plans
    return {kernel.label for kernel in kernels_of(spec)
            if all(plans[kernel.label, shape.label].refused_before_compiling for shape in spec.shapes
                   if (kernel.label, shape.label) in plans)}


def check_offline(spec: Spec, arch: str = "sm_90", *, compile: bool = True) -> list[CasePlan]:
    """The plans of `spec` for `arch`'s published limits that fail a check: no GPU needed.

    For ``driver-gemm run`` to call when no GPU answers, so that a spec whose
    launches cannot work is reported as such on any machine. With `compile`
    the kernels are built (NVRTC needs no GPU) and each plan completed with
    its kernel's resources and signature check; a source that does not
    compile is left out here (`offline_problems` gives its error). An empty
    list means every case passes the checks that can be made here.
    """
    return offline_problems(spec, arch, compile=compile)[0]


def offline_problems(spec: Spec, arch: str = "sm_90", *,
                     compile: bool = True) -> tuple[list[CasePlan], dict[str, CompileError]]:
    """`check_offline`'s plans, and the error of each kernel that did not build, by kernel label."""
    limits = arch_limits(arch)
    plans = launch_plans(spec, limits)
    failed: dict[str, CompileError] = {}
    if compile:
        compiled = compile_spec(spec, arch, skip=refused_everywhere(spec, limits, plans))
        plans = {key: complete_plan(plan, compiled.get(plan.kernel.label), limits)
                 for key, plan in plans.items()}
        failed = {label: built for label, built in compiled.items() if isinstance(built, CompileError)}
    return [plan for plan in plans.values() if not plan.valid], failed


def signature_error(kernel: KernelSpec, built: Cubin) -> SpecError | ImageError | None:
    """What is wrong with `kernel`'s signature against the image `built` holds; None when they agree.

    A `SpecError` at the signature's file:line for a mismatch (count, sizes,
    and the types a C++ symbol's mangling gives); an `ImageError` when the
    image's parameters cannot be read (the check is then not made).
    """
    try:
        image = parameters_image(built, kernel.instance)
    except ImageError as exc:
        return exc
    try:
        check_kernel_signature(kernel, image, output_written_elsewhere=bool(kernel.then) and any(
            written is True for written in output_writers(kernel, built)[1:]))
    except SpecError as exc:
        return exc
    return None


def output_writers(kernel: KernelSpec, built: Cubin) -> list[bool | None]:
    """Whether each launch of a case writes C, as its function's parameter types say (`launch_writes_output`): the
    kernel's own first, then each of then:'s in order (None where it cannot be told). The case's sequence is judged
    as a whole: a launch that only reads C (row statistics, an amax) is fine where another launch writes it."""
    launches = [(kernel.instance, kernel.signature),
                *((kernel.following_instance(launch), following_signature(kernel, launch)) for launch in kernel.then)]
    writers: list[bool | None] = []
    for instance, signature in launches:
        try:
            writers.append(launch_writes_output(parameters_image(built, instance), signature))
        except (ImageError, KeyError):
            writers.append(None)
    return writers


def following_signature(kernel: KernelSpec, launch: FollowingLaunch) -> tuple:
    """A launch of then:'s signature with the kernel's buffers it names as the buffers they are: checked as such
    (their element against the pointer's pointee), as they are in the kernel's own signature."""
    buffers = {argument.name: argument for _, argument in kernel.device_buffers()}
    return tuple(buffers.get(argument.name, argument) if argument.ctype == "ptr" else argument
                 for argument in launch.signature)


def parameters_image(built: Cubin, instance: str) -> KernelImage:
    """What a signature is checked against: `instance`'s symbol and its parameters as the image holds them, read
    from a CUBIN's attributes or a PTX's ``.entry`` alike. Raises `ImageError` when they cannot be read."""
    slots = built.param_slots(instance)
    return KernelImage(name=built.symbol(instance), params=slots, param_bytes=sum(slot.size for slot in slots),
                       registers=0)


def following_signature_errors(kernel: KernelSpec, built: Cubin) -> list[SpecError]:
    """Each ``then:`` launch's signature against its function's parameters in the image (a CUBIN's or a PTX's,
    `parameters_image`), as the kernel's own is checked, said at ``then[i].signature``."""
    errors = []
    writers = output_writers(kernel, built) if kernel.then else []
    for launch in kernel.then:
        try:
            image = parameters_image(built, kernel.following_instance(launch))
        except (ImageError, KeyError):
            continue
        where = f"then[{launch.index}]"
        described = types.SimpleNamespace(signature=following_signature(kernel, launch), operands=kernel.operands,
                                          field_path=f"{kernel.field_path}.{where}",
                                          where_field=lambda name, where=where: kernel.where_field(f"{where}.{name}"))
        elsewhere = any(written is True for other, written in enumerate(writers) if other != launch.index + 1)
        try:
            check_kernel_signature(described, image, output_written_elsewhere=elsewhere)
        except SpecError as exc:
            errors.append(exc)
    return errors


# The checks of a kernel against its image, made once per kernel and image, not once per shape: by the ids of
# both, holding both so that the ids stay theirs; emptied when it grows past a sweep's worth.
_IMAGE_CHECKS: dict[tuple[int, int], tuple] = {}
_IMAGE_CHECKS_KEPT = 4096


def _image_checks(kernel: KernelSpec, built: Cubin) -> tuple[list[SpecError], SpecError | ImageError | None]:
    key = (id(kernel), id(built))
    found = _IMAGE_CHECKS.get(key)
    if found is None or found[0] is not kernel or found[1] is not built:
        if len(_IMAGE_CHECKS) >= _IMAGE_CHECKS_KEPT:
            _IMAGE_CHECKS.clear()
        # The params' order is not among these: it is checked before compiling (`with_template_order`).
        found = _IMAGE_CHECKS[key] = (kernel, built, [*boolean_parameter_problems(kernel, built),
                                                      *following_signature_errors(kernel, built)],
                                      signature_error(kernel, built))
    return found[2], found[3]


def params_out_of_template_order(kernel: KernelSpec) -> list[SpecError]:
    """Params that carry the names of the template's own parameters in another order (``{BN: 32, BM: 8}`` for
    ``template <int BM, int BN>``): params are passed by position, so the kernel would be built with BM = 32 and the
    launch read BM = 8, a kernel other than the one the spec describes. Refused where every param is one of the
    template's names and every template declaration of the function found in the source and its headers puts
    them elsewhere; params of the spec's own names, or a function the source does not declare as a template
    written out, are not read, except beside the template's own names, where one named for a GEMM dimension
    stands in the place of a parameter named for another (`params_by_position`)."""
    read = _declared_templates(kernel)
    if read is None:
        return []
    names, function, declared = read

    def shifted(template: list[str | None]) -> bool:     # a name of the template's given in another one's place
        return any(name in template and (position >= len(template) or template[position] != name)
                   for position, name in enumerate(names))

    misplaced = [template for template in declared if shifted(template)]
    if not misplaced or len(misplaced) < len(declared):
        return _crossed_beside_the_templates_names(kernel, names, function, declared)
    template = misplaced[0]
    moved = [f"{name} would be passed as {template[index]}" for index, name in enumerate(names)
             if index < len(template) and template[index] != name][:3]
    declared_as = ", ".join(name or "?" for name in template)
    if set(names) <= set(template):
        last = max(template.index(name) for name in names)
        in_order = ", ".join(f"{name}: {_written(kernel.params[name]) if name in names else '...'}"
                             for name in template[:last + 1])
        hint = f"give them in the template's order, from its first: params: {{{in_order}}}"
    else:
        hint = f"params are passed by position from the template's first ({declared_as}): give each in its place"
    return [SpecError(f"params name the template's parameters in another order than {function} declares them "
                      f"(template <{declared_as}>): params are passed in order, so {'; '.join(moved)}",
                      where=kernel.where_field("params"), field=f"{kernel.field_path}.params", hint=hint)]


def _written(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _declared_templates(kernel: KernelSpec) -> tuple[tuple[str, ...], str, list[list[str | None]]] | None:
    """The kernel's template params, its function's unqualified name, and the parameter names of each template
    declaration of that function in the source and its headers; None where there is nothing to read."""
    function = _template_function(kernel)
    if function is None or kernel.source is None:
        return None
    names = tuple(name for name in kernel.params if name not in kernel.launch_values)
    try:
        stat = kernel.source.stat()
    except OSError:
        return None
    key = (kernel.source, stat.st_mtime_ns, stat.st_size, tuple(include_folders(kernel.options)), function)
    declared = _TEMPLATE_HEADERS.get(key)
    if declared is None:
        texts = _source_texts(kernel)
        if texts is None:
            return None
        if len(_TEMPLATE_HEADERS) >= _IMAGE_CHECKS_KEPT:
            _TEMPLATE_HEADERS.clear()
        declared = _TEMPLATE_HEADERS[key] = template_parameter_names(function, texts)
    return names, function, declared


def _template_function(kernel: KernelSpec) -> str | None:
    """The unqualified name of the function `kernel`'s params are template arguments of; None where there is
    nothing to read of its template: no params beside the launch's values, no source, or a template-id in
    `function` that names its arguments itself."""
    if kernel.source is None or "<" in kernel.function \
            or all(name in kernel.launch_values for name in kernel.params):
        return None
    return kernel.function.split("(", 1)[0].rsplit("::", 1)[-1].strip()


def _source_texts(kernel: KernelSpec) -> list[str] | None:
    """The texts of `kernel`'s source and its local headers, the source first; None where one cannot be read (its
    compile says why)."""
    assert kernel.source is not None, "a kernel built from source"
    try:
        text = read_source(kernel.source)
        return [text, *local_headers(text, [kernel.source.parent, *include_folders(kernel.options)]).values()]
    except (OSError, CompileError, SpecError):
        return None


def _one_template(declared: list[list[str | None]]) -> list[str | None] | None:
    """The parameter names every template declaration of a function agrees on; None where there are none, or
    overloads of other parameters (which one is meant is not read from the source)."""
    distinct = {tuple(template) for template in declared}
    return list(distinct.pop()) if len(distinct) == 1 else None


def _crossed_beside_the_templates_names(kernel: KernelSpec, names: tuple[str, ...], function: str,
                                        declared: list[list[str | None]]) -> list[SpecError]:
    """Params mixing the template's names with others, where one of the others is named for a GEMM dimension and
    passed by position in the place of a parameter named for another (``{TILE_N: 64, TILE_M: 128, BK: 16}`` for
    ``template <int BM, int BN, int BK>``): the launch reads TILE_N as N's tile while the kernel takes it as BM."""
    template = _one_template(declared)
    if template is None:
        return []
    by_position = params_by_position(names, template)
    if not by_position.mixed or not by_position.crossed:
        return []
    crossed = [name for name, _ in by_position.crossed]
    own = ", ".join(name for name in names if name in template)
    declared_as = ", ".join(name or "?" for name in template)
    in_order = ", ".join(f"{place}: {_written(kernel.params[place]) if place in names else '...'}"
                         for place in template[:len(names)] if place is not None)
    return [SpecError(f"params mix names of the spec's own with the template's ({own}), and params are passed by "
                      f"position (template <{declared_as}>): {by_position.mapping}, so "
                      f"{' and '.join(crossed)} "
                      + ("reaches a parameter of another dimension than its name says" if len(crossed) == 1 else
                         "reach parameters of other dimensions than their names say"),
                      where=kernel.where_field("params"),
                      field=f"{kernel.field_path}.params",
                      hint=f"give each param under {function}'s own name for its place: params: {{{in_order}}}")]


def params_passed_by_position(kernel: KernelSpec) -> list[str]:
    """A note of how params none of whose names is the template's reach it (``TILE_N -> BM, TILE_M -> BN``): by
    position, which a spec may mean, but which its names do not show. Nothing where a name is no spelling of its
    place's, or a mix is refused (`params_out_of_template_order`)."""
    read = _declared_templates(kernel)
    template = _one_template(read[2]) if read is not None else None
    if read is None or template is None:
        return []
    by_position = params_by_position(read[0], template)
    if by_position.mixed or not by_position.passed or not by_position.unlike:
        return []
    return [f"params are passed to {read[1]} by position, not by name: {by_position.mapping}"]


# Template headers read from a kernel's source and headers, by the source's path, its modification time and size,
# its include folders and the function: read once for a sweep, not once per configuration.
_TEMPLATE_HEADERS: dict[tuple, list[list[str | None]]] = {}


def boolean_parameter_problems(kernel: KernelSpec, built: Cubin) -> list[SpecError]:
    """A YAML boolean (true/false) given for a template parameter the kernel declares as a number: C++ would take it
    as 1 or 0 without a word, so it is refused at the parameter's line. Read from the image's symbol, whose
    mangling keeps a bool argument (``Lb1E``) apart from an integer one (``Li1E``)."""
    flags = [(name, value) for name, value in kernel.params.items() if isinstance(value, bool)]
    if not flags:
        return []
    demangled = demangle(built.symbol(kernel.instance))
    if demangled is None or not demangled.name.startswith(demangled.base_name + "<"):
        return []
    arguments = _template_arguments(demangled.name[len(demangled.base_name):])
    if len(arguments) != len(kernel.params):
        return []
    by_name = dict(zip(kernel.params, arguments))
    return [SpecError(f"{name} is {str(value).lower()}, a YAML boolean, but the kernel's template parameter takes "
                      f"a number (it became {by_name[name]})", where=kernel.where_field(f"params.{name}"),
                      field=f"{kernel.field_path}.params.{name}", hint=f"write {int(value)} for a number")
            for name, value in flags if by_name[name] not in ("true", "false")]


def _template_arguments(text: str) -> list[str]:
    """``<64, true, ns::T<1, 2> >`` as its top-level arguments."""
    inner = text.strip()[1:-1] if text.strip().startswith("<") and text.strip().endswith(">") else ""
    arguments, depth, current = [], 0, ""
    for character in inner:
        if character == "," and depth == 0:
            arguments.append(current.strip())
            current = ""
            continue
        depth += {"<": 1, ">": -1, "(": 1, ")": -1}.get(character, 0)
        current += character
    return [*arguments, current.strip()] if inner else []


def complete_plan(plan: CasePlan, built: "Cubin | CompileError | None", limits: ArchLimits,
                  sm_count: int | None = None) -> CasePlan:
    """`plan` with what the built image says: its resources and occupancy, and its signature checked.

    A plan whose kernel did not build is returned as it is. For PTX the
    resources are unknown until the driver compiles it at load: the plan
    says so in its notes. A signature that disagrees with the image, a tensor
    map of another rank than the kernel's TMA copies, or a grid its compiled
    cluster does not divide (`image_checks`) makes the plan invalid (its cases
    INVALID, never launched); each launch of its then: is checked against its
    own function alike (`following_image_checks`).
    """
    if not isinstance(built, Cubin):
        return plan
    kernel = plan.kernel
    if built.resources_known:
        plan = with_resources(plan, built.resources_of(kernel.instance), limits, sm_count)
    else:
        unchecked = [built.log] if built.log.startswith("PTX not checked") else []
        plan = dataclasses.replace(plan, notes=[*plan.notes, "PTX: registers and shared memory are known only "
                                                             "once the driver has compiled it at load", *unchecked])
    booleans, problem = _image_checks(kernel, built)
    if booleans:
        plan = dataclasses.replace(plan, problems=[*plan.problems, *booleans])
    if isinstance(problem, SpecError):
        plan = dataclasses.replace(plan, problems=[*plan.problems, problem])
    elif problem is not None:
        plan = dataclasses.replace(plan, notes=[*plan.notes, f"signature not checked: {problem}"])
    problems, notes = image_checks(plan, built, limits)
    plan = _launch_fact_checks(plan, built)
    following_problems, following_notes = following_image_checks(plan, built, limits)
    problems, notes = [*problems, *following_problems], [*notes, *following_notes]
    if problems or notes:
        plan = dataclasses.replace(plan, problems=[*plan.problems, *problems], notes=[*plan.notes, *notes])
    return plan


def _launch_fact_checks(plan: CasePlan, built: Cubin) -> CasePlan:
    """`plan` with what the kernel's PTX says of the launch beyond `image_checks`: a grid of numbers alone held to C
    where the kernel is no persistent one (`case_plan.literal_grid_check`), an axis taken to share out tiles as a
    multiple of them held to being a split of K where the kernel never reads the grid's size
    (`case_plan.split_multiple_check`), a grid that gives a batch's (or masked groups') matrices no blocks held to
    them where the kernel picks its matrix by a block index left at 1 (`case_plan.uncounted_matrices_check`), and
    the kernel's use of its cluster against a launch of one block a cluster (`hopper_checks.cluster_use_checks`)."""
    kernel = plan.kernel
    try:
        symbol = built.symbol(kernel.instance)
        image = built.kernel_image(kernel.instance)
    except (ImageError, KeyError):
        return plan
    facts = facts_of(built, symbol)
    if facts is None:
        return plan
    plan = literal_grid_check(plan, facts.block_reads, facts.reads_grid_size)
    plan = split_multiple_check(plan, facts.reads_grid_size)
    plan = uncounted_matrices_check(plan, facts.block_reads, facts.reads_grid_size)
    problems: list[SpecError] = []

    def problem(message: str, field_name: str, hint: str | None = None) -> None:
        problems.append(ConfigError(message, where=kernel.where_field(field_name),
                                    field=f"{kernel.field_path}.{field_name}", hint=hint))

    notes = cluster_use_checks(facts, plan.attributes, compiled_cluster(image, facts), problem)
    if not problems and not notes:
        return plan
    return dataclasses.replace(plan, problems=[*plan.problems, *problems], notes=[*plan.notes, *notes])


def plan_with_drivers_count(plan: CasePlan, built: Cubin, limits: ArchLimits, active_clusters: int) -> CasePlan:
    """`plan` made again, once its kernel is loaded, with the driver's count of the clusters (or blocks) that fit at
    once, for a grid that reads `max_active_clusters`; `limits` are the GPU's."""
    again = plan_launch(plan.kernel, plan.shape, limits, plan.scalars, driver_active_clusters=active_clusters,
                        written_scalars=plan.written_scalars)
    return complete_plan(again, built, limits, limits.typical_sm_count)


def led_by_spec_line(error: CompileError, kernels: list[KernelSpec]) -> CompileError:
    """`error` led by the spec's line of the kernel entry it kept out (and the names of the others it kept out),
    as `plan` says it and a run records it."""
    first = kernels[0]
    names = list(dict.fromkeys(kernel.name for kernel in kernels))
    field_name = "binary" if first.binary is not None else "source"
    others = f" (and {', '.join(names[1:])})" if len(names) > 1 else ""
    labels = list(dict.fromkeys(kernel.label for kernel in kernels if _swept(kernel)))
    # A sweep whose other instances built: the ones that did not, by their parameters.
    which = (f" for {', '.join(labels[:4])}" + (f" and {len(labels) - 4} more" if len(labels) > 4 else "")
             if labels else "")
    lead = f"{first.where_field(field_name)}: {first.field_path}.{field_name}{others} did not build{which}:"
    following = _failed_following(error, kernels)
    if following is not None:   # the kernel's own function built: the function of a launch of its then: did not
        kernel, launch = following
        at = f"then[{launch.index}].function"
        lead = (f"{kernel.where_field(at)}: {kernel.field_path}.{at}{others}: {kernel.following_instance(launch)} "
                f"did not build{which}:")
    return CompileError(f"{lead}\n{error}", log=error.log, options=error.options)


# The function a build could not make, as NVRTC says it (Input name expression was: " reduce < 4 >") and as a
# prebuilt image's lookup does (no kernel matches function 'reduce<4>', function 'reduce<4>' is ambiguous).
_FAILED_FUNCTION = re.compile(r'Input name expression was: "([^"]*)"|no kernel matches function \'([^\']*)\''
                              r'|function \'([^\']*)\' is ambiguous')


def _failed_following(error: CompileError, kernels: list[KernelSpec]) -> tuple[KernelSpec, FollowingLaunch] | None:
    """The kernel and its launch of then: whose function `error` names as not built, where every function it
    names so is such a launch's; None where it names the kernel's own function, or none."""
    def bare(text: str) -> str:    # NVRTC spaces a name expression's tokens out: compared without spaces
        return "".join(text.split())

    failed = {bare(next(group for group in found.groups() if group is not None))
              for found in _FAILED_FUNCTION.finditer(str(error))}
    if not failed or any(bare(kernel.instance) in failed for kernel in kernels):
        return None
    return next(((kernel, launch) for kernel in kernels for launch in kernel.then
                 if bare(kernel.following_instance(launch)) in failed), None)


def _swept(kernel: KernelSpec) -> bool:
    """Whether `kernel` is one configuration of an entry that sweeps its params or values (other ones may have
    built)."""
    entry = kernel.entry or {}
    return any(_sweeps(entry.get(key)) for key in ("params", "values"))


def _sweeps(named: object) -> bool:
    """Whether a ``params`` or ``values`` field names more than one configuration: a list of them, or a list
    among its values."""
    if isinstance(named, list):
        return len(named) > 1 or any(_sweeps(item) for item in named)
    return isinstance(named, Mapping) and any(isinstance(value, list) and len(value) > 1 for value in named.values())


def build_kernels(kernels: list[KernelSpec], target: str) -> Cubin:
    """One program: kernels sharing a source (or binary), compiler, options and target, built together."""
    first = kernels[0]
    instances = list(dict.fromkeys(instance for kernel in kernels for instance in kernel.instances))
    if first.binary is not None:
        try:
            return load_binary(first.binary, instances, target)
        except ImageError as exc:   # recorded against the kernel's cases, as a compile error is
            raise CompileError(str(exc)) from None
    if first.compiler == "nvcc":
        return compile_with_nvcc(first.source, instances, target, first.options,
                                 allow_outside_headers=first.allow_outside_headers, project=first.project)
    return compile_source(first.source, instances, target, first.options,
                          allow_outside_headers=first.allow_outside_headers, project=first.project)


def compile_spec(spec: Spec, arch: str, jobs: int | None = None,
                 skip: set[str] | frozenset[str] = frozenset()) -> Compiled:
    """Compile every kernel of `spec` for `arch`, or for its own ``arch``: NVRTC programs, in parallel.

    The value for a kernel label is its `Cubin`, or the `CompileError` its source raised (recorded
    against each of its cases, not raised). One source's instances are shared out over up to `jobs`
    programs (default: one per CPU, at most 16) compiled on as many threads, since NVRTC compiles
    separate programs concurrently; when a program of several instances fails, each is compiled alone
    so one bad instance does not take its siblings down. Kernels named in `skip` are left out.
    """
    jobs = max(1, jobs or min(os.cpu_count() or 1, 16))
    groups: dict[tuple, list[KernelSpec]] = {}
    for kernel in (k for k in kernels_of(spec) if k.label not in skip):
        key = (kernel.source, kernel.options, kernel.target(arch), kernel.compiler, kernel.binary)
        groups.setdefault(key, []).append(kernel)
    programs: list = []
    # Configurations that differ only in values: build the same instances: one of them is built, and its result
    # is every one's (built in two programs at once, each would miss the disk cache and compile it again).
    twins: dict[str, list[KernelSpec]] = {}
    for key, kernels in groups.items():
        firsts: dict[tuple[str, ...], KernelSpec] = {}
        for kernel in kernels:
            first = firsts.setdefault(tuple(kernel.instances), kernel)
            twins.setdefault(first.label, []).extend([kernel] if kernel is not first else [])
        kernels = list(firsts.values())
        # A binary is read once; nvcc and NVRTC programs are shared out over the jobs.
        count = 1 if key[-1] is not None else min(jobs, len(kernels))
        programs.extend((key[2], kernels[part::count]) for part in range(count))
    compiled: Compiled = {}

    def compile_program(target, kernels) -> None:
        try:
            cubin: Cubin | CompileError = build_kernels(kernels, target)
        except CompileError as exc:
            plain = _params_of_a_plain_function(kernels[0])
            if plain is not None:       # every instance fails alike: said once, without compiling each alone
                for kernel in kernels:
                    compiled[kernel.label] = plain
                return
            if len(kernels) > 1:
                for kernel in kernels:
                    compile_program(target, [kernel])
                return
            cubin = template_argument_error(kernels[0], exc) or exc
        for kernel in kernels:
            compiled[kernel.label] = cubin

    def with_twins() -> Compiled:
        for label, others in twins.items():
            for kernel in others:
                if label in compiled:
                    compiled[kernel.label] = compiled[label]
        return compiled

    if len(programs) <= 1:
        for program in programs:
            compile_program(*program)
        return with_twins()
    pool = concurrent.futures.ThreadPoolExecutor(min(jobs, len(programs)))
    # The compiles of this call only: an interrupt stops them and no other thread's, and leaves nothing behind
    # that would stop a later compile.
    with bounded.stop_scope() as scope:
        try:
            with bounded.terminated_as_interrupt():
                task = bounded.in_scope(compile_program)
                for done in [pool.submit(task, *program) for program in programs]:
                    done.result()
        except BaseException:
            # Ctrl-C (or SIGTERM): nothing queued starts, and every compile of this call still running is killed.
            pool.shutdown(wait=False, cancel_futures=True)
            scope.stop()
            raise
    pool.shutdown()
    return with_twins()


def _params_of_a_plain_function(kernel: KernelSpec) -> CompileError | None:
    """Where a kernel whose build failed gives params to a function its source declares only as a plain (not
    template) ``__global__`` function, the error that says so: params are template arguments, so the instance
    they name (k<8>) is no kernel, whichever compiler was asked. None otherwise (nothing more is known)."""
    name = _template_function(kernel)
    texts = _source_texts(kernel) if name is not None else None
    if name is None or texts is None:
        return None
    declared = plain_declarations(name, texts)
    if not declared:
        return None
    template_params = [param for param in kernel.params if param not in kernel.launch_values]
    names = ", ".join(template_params)
    return CompileError(
        f"{kernel.where_field('params')}: {kernel.field_path}.params: {name} is no template (the source declares "
        f"{'; '.join(declared)}, with no template <...>), so params ({names}), which are template arguments, "
        f"make {kernel.instance}, which names no kernel. A value only the launch reads (a block side its launcher "
        f"picks at run time) goes under values: instead (values: {{{names}: ...}}), swept as params are")


def template_argument_error(kernel: KernelSpec, error: CompileError) -> CompileError | None:
    """Where `kernel`'s build failed (with `error`) and its params do not fit its function's template as the source
    declares it (too few, too many, a type where it takes a value: `template_arguments_problem`), the error that
    says so at ``params``, the compiler's own (of an instance it cannot determine) after it; None otherwise."""
    function = _template_function(kernel)
    texts = _source_texts(kernel) if function is not None else None
    if function is None or texts is None:
        return None
    params = {name: value for name, value in kernel.params.items() if name not in kernel.launch_values}
    problem = template_arguments_problem(function, params, template_parameters(function, texts))
    if problem is None:
        return None
    return CompileError(f"{kernel.where_field('params')}: {kernel.field_path}.params: {problem}\n{error}",
                        log=error.log, options=error.options)


def plan_cases(spec: Spec, limits: ArchLimits, arch: str, sm_count: int | None = None,
               skip: set[tuple[str, str]] | frozenset[tuple[str, str]] = frozenset()) -> tuple[list[Case], Compiled]:
    """The cases of `spec` still to run (those keyed in `skip` left out), each with its plan, and what compiled.

    Each kernel case is planned once: its launch before compiling (a kernel
    no shape can launch is not compiled), then, for a kernel that compiled,
    completed with its resources. A case whose kernel was not compiled keeps
    its launch plan; the pipeline records why it cannot run.
    """
    cases = [case for case in cases_of(spec) if case.key not in skip]
    if not cases:
        return [], {}
    plans = launch_plans(spec, limits)
    compiled = compile_spec(spec, arch, skip=refused_everywhere(spec, limits, plans))
    planned = []
    for case in cases:
        if case.kernel is not None:
            plan = complete_plan(plans[case.key], compiled.get(case.kernel.label), limits, sm_count)
            case = dataclasses.replace(case, plan=plan)
        planned.append(case)
    return planned, compiled
