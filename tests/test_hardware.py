"""The accelerator and cloud-instance catalogs, and how names resolve to devices."""

from __future__ import annotations

import re

import pytest

from trainlint.estimator.hardware import (
    Gpu,
    Target,
    UnknownTarget,
    find_gpu,
    gpu_table,
    load_gpus,
    load_instances,
    resolve_target,
    smallest_fitting,
)

GIB = 2**30
STACKS = {"cuda", "rocm", "habana", "xpu", "mps", "xla", "neuron"}


def _key(name: str) -> str:
    return "".join(re.findall(r"[a-z0-9]+", name.lower()))


# --- the catalogs


def test_catalog_sizes():
    assert len(load_gpus()) >= 40
    assert len(load_instances()) >= 60


def test_catalogs_are_cached():
    assert load_gpus() is load_gpus()
    assert load_instances() is load_instances()


def test_gpu_names_are_unique_even_when_normalised():
    names = [name for gpu in load_gpus() for name in (gpu.id, *gpu.aliases)]
    assert len(names) == len(set(names))
    assert len({_key(name) for name in names}) == len(names)


def test_instance_names_are_unique_and_do_not_shadow_gpus():
    names = [name for instance in load_instances() for name in (instance.name, *instance.aliases)]
    assert len({_key(name) for name in names}) == len(names)
    gpu_keys = {_key(name) for gpu in load_gpus() for name in (gpu.id, *gpu.aliases)}
    assert not gpu_keys & {_key(name) for name in names}


def test_gpu_ids_are_kebab_case():
    for gpu in load_gpus():
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", gpu.id), gpu.id


@pytest.mark.parametrize("gpu", load_gpus(), ids=lambda gpu: gpu.id)
def test_gpu_row_is_consistent(gpu: Gpu):
    assert 0 < gpu.usable_bytes <= gpu.memory_bytes
    assert gpu.stack in STACKS
    assert gpu.context_bytes >= 0
    assert gpu.bandwidth_gb_s is None or gpu.bandwidth_gb_s > 0
    assert gpu.source.strip()


def test_usable_fractions_follow_the_memory_kind():
    by_id = {gpu.id: gpu for gpu in load_gpus()}
    for hbm_part in ("h100-sxm", "a100-80gb", "mi300x", "b200"):
        assert 0.97 <= by_id[hbm_part].usable_bytes / by_id[hbm_part].memory_bytes <= 0.99
    assert 0.90 <= by_id["t4"].usable_bytes / by_id["t4"].memory_bytes <= 0.92
    # a consumer card keeps a display reserve of a few hundred MiB on top of the driver's share
    rtx = by_id["rtx-4090"]
    assert rtx.memory_bytes - rtx.usable_bytes > 400 * 2**20


def test_every_vendor_family_is_present():
    vendors = {gpu.vendor for gpu in load_gpus()}
    assert {"nvidia", "amd", "intel", "apple"} <= vendors
    assert {gpu.stack for gpu in load_gpus()} == STACKS


def test_bf16_is_off_before_ampere():
    for gpu_id in ("t4", "v100-16gb", "p100-16gb", "rtx-2080-ti"):
        assert find_gpu(gpu_id).bf16 is False
    for gpu_id in ("a100-80gb", "h100-sxm", "l4", "rtx-4090"):
        assert find_gpu(gpu_id).bf16 is True


def test_nvidia_context_is_the_lazy_loading_figure():
    context = find_gpu("h100-sxm").context_bytes
    assert 0.1 * GIB <= context <= 0.15 * GIB


def test_every_instance_names_a_known_gpu_and_a_source():
    for instance in load_instances():
        assert find_gpu(instance.gpu) is not None, instance.name
        assert instance.count >= 1
        assert instance.source.strip()


def test_instances_cover_the_providers():
    providers = {instance.provider for instance in load_instances()}
    assert {"aws", "gcp", "azure", "lambda", "oci"} <= providers
    assert any(name.startswith("ml.") for instance in load_instances() for name in instance.aliases)


def test_slices_are_smaller_than_their_gpu():
    slices = [instance for instance in load_instances() if instance.slice_bytes is not None]
    assert slices
    for instance in slices:
        assert instance.count == 1
        assert 0 < instance.slice_bytes < find_gpu(instance.gpu).memory_bytes


# --- finding a GPU


@pytest.mark.parametrize(
    ("name", "gpu_id"),
    [
        ("a100-80gb", "a100-80gb"),
        ("A100 80GB", "a100-80gb"),
        ("a100_80gb", "a100-80gb"),
        ("a100-80", "a100-80gb"),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
        ("NVIDIA A100 80GB PCIe", "a100-80gb-pcie"),
        ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("h100", "h100-sxm"),
        ("Tesla T4", "t4"),
        ("Tesla V100-SXM2-16GB", "v100-16gb"),
        ("NVIDIA GeForce RTX 4090", "rtx-4090"),
        ("RTX4090", "rtx-4090"),
        ("NVIDIA RTX 6000 Ada Generation", "rtx-6000-ada"),
        ("AMD Instinct MI300X", "mi300x"),
        ("Intel Gaudi 2", "gaudi2"),
        ("m2-ultra-192gb", "m2-ultra-192gb"),
        # GCP accelerator type names: the full name wins over the brand-stripped "a100"
        ("nvidia-tesla-a100", "a100-40gb"),
        ("nvidia-tesla-t4", "t4"),
        ("nvidia-h100-80gb", "h100-sxm"),
    ],
)
def test_find_gpu(name: str, gpu_id: str):
    assert find_gpu(name).id == gpu_id


@pytest.mark.parametrize("name", ["a100", "v100", "not-a-gpu", "p4d.24xlarge", ""])
def test_find_gpu_returns_none_for_ambiguous_unknown_and_instances(name: str):
    assert find_gpu(name) is None


# --- resolving a target


@pytest.mark.parametrize(
    ("spec", "gpu_id", "count"),
    [
        ("a100-80gb", "a100-80gb", 1),
        ("A100 80GB", "a100-80gb", 1),
        ("8xa100-80gb", "a100-80gb", 8),
        ("8x A100-80GB", "a100-80gb", 8),
        ("8 × h100", "h100-sxm", 8),
        ("a100-80gb x8", "a100-80gb", 8),
        ("a100-80gb x 8", "a100-80gb", 8),
        ("mi300x x2", "mi300x", 2),
        ("2xmi300x", "mi300x", 2),
    ],
)
def test_resolve_gpu_and_count(spec: str, gpu_id: str, count: int):
    target = resolve_target(spec)
    assert (target.gpu.id, target.count, target.instance) == (gpu_id, count, None)


@pytest.mark.parametrize(
    ("spec", "gpu_id", "count"),
    [
        ("p4d.24xlarge", "a100-40gb", 8),
        ("p4de.24xlarge", "a100-80gb", 8),
        ("p5.48xlarge", "h100-sxm", 8),
        ("g4dn.xlarge", "t4", 1),
        ("g5.12xlarge", "a10g", 4),
        ("ml.g5.12xlarge", "a10g", 4),
        ("ML.P4D.24XLARGE", "a100-40gb", 8),
        ("trn1.32xlarge", "trainium", 16),
        ("Standard_ND96isr_H100_v5", "h100-sxm", 8),
        ("ND96amsr_A100_v4", "a100-80gb", 8),
        ("standard_nc24ads_a100_v4", "a100-80gb-pcie", 1),
        ("a3-highgpu-8g", "h100-sxm", 8),
        ("a2-highgpu-4g", "a100-40gb", 4),
        ("g2-standard-48", "l4", 4),
        ("v5p-8", "tpu-v5p", 4),
        ("gpu_8x_a100_80gb_sxm4", "a100-80gb", 8),
        ("gpu_1x_a100", "a100-40gb", 1),
        ("BM.GPU.H100.8", "h100-sxm", 8),
        ("H200_X_8", "h200", 8),
    ],
)
def test_resolve_instance(spec: str, gpu_id: str, count: int):
    target = resolve_target(spec)
    assert (target.gpu.id, target.count) == (gpu_id, count)
    assert target.instance is not None
    assert target.usable_bytes_per_device == target.gpu.usable_bytes


def test_sagemaker_name_resolves_to_the_ec2_instance():
    assert resolve_target("ml.p4d.24xlarge").instance == resolve_target("p4d.24xlarge").instance


def test_count_before_an_instance_multiplies_it():
    target = resolve_target("2x p4d.24xlarge")
    assert (target.gpu.id, target.count, target.instance.name) == ("a100-40gb", 16, "p4d.24xlarge")


def test_gpus_overrides_the_count():
    assert resolve_target("a100-80gb", gpus=4).count == 4
    assert resolve_target("8xa100-80gb", gpus=2).count == 2
    target = resolve_target("p4d.24xlarge", gpus=1)
    assert (target.count, target.instance.name) == (1, "p4d.24xlarge")
    with pytest.raises(ValueError, match="at least 1"):
        resolve_target("a100-80gb", gpus=0)


def test_fractional_slice_reports_the_slice_memory():
    target = resolve_target("Standard_NV6ads_A10_v5")
    a10 = find_gpu("a10")
    assert (target.gpu.id, target.count) == ("a10", 1)
    assert target.instance.slice_bytes == 4 * GIB
    # the slice keeps the whole card's usable share: a bit under 4 GiB, nowhere near 24
    assert 3.5 * GIB < target.usable_bytes_per_device < 4 * GIB
    assert target.usable_bytes_per_device < a10.usable_bytes
    assert resolve_target("Standard_NV36ads_A10_v5").usable_bytes_per_device == a10.usable_bytes


def test_plain_target_uses_the_gpu_usable_bytes():
    gpu = find_gpu("h100-sxm")
    assert Target(gpu, 2).usable_bytes_per_device == gpu.usable_bytes


# --- refusing


@pytest.mark.parametrize("spec", ["a100", "A100", "NVIDIA A100", "8xa100", "a100 x4"])
def test_bare_a100_is_ambiguous(spec: str):
    with pytest.raises(UnknownTarget) as raised:
        resolve_target(spec)
    assert {"a100-40gb", "a100-80gb"} <= set(raised.value.candidates)
    message = str(raised.value)
    assert spec in message
    assert "a100-40gb" in message and "a100-80gb" in message


def test_memory_less_apple_name_is_refused_not_guessed():
    with pytest.raises(UnknownTarget) as raised:
        resolve_target("M2 Ultra")
    assert raised.value.candidates == ("m2-ultra-192gb",)


def test_unknown_name_gets_close_suggestions():
    with pytest.raises(UnknownTarget) as raised:
        resolve_target("h300")
    assert "'h300'" in str(raised.value)
    assert 1 <= len(raised.value.candidates) <= 3
    assert "h200" in raised.value.candidates
    for suggestion in raised.value.candidates:
        assert suggestion in str(raised.value)


def test_misspelt_instance_is_suggested():
    with pytest.raises(UnknownTarget) as raised:
        resolve_target("p4d.24xlarg")
    assert "p4d.24xlarge" in raised.value.candidates


def test_hopeless_name_points_at_the_listing():
    with pytest.raises(UnknownTarget, match="trainlint gpus") as raised:
        resolve_target("quantum-toaster-9000")
    assert raised.value.candidates == ()


def test_unknown_target_is_a_value_error():
    with pytest.raises(ValueError):
        resolve_target("")


@pytest.mark.parametrize("spec", ["0xa100-80gb", "8xnot-a-gpu"])
def test_bad_counts_and_unknown_counted_names_are_refused(spec: str):
    with pytest.raises(UnknownTarget):
        resolve_target(spec)


# --- listing and choosing


def test_gpu_table_has_aligned_known_rows():
    table = gpu_table()
    lines = table.splitlines()
    assert lines[0].split()[:2] == ["id", "name"]
    assert len(lines) == len(load_gpus()) + 1
    a100 = next(line for line in lines if line.startswith("a100-80gb "))
    assert "80.0" in a100 and "79.1" in a100 and "nvidia/cuda" in a100
    assert any(line.startswith("mi300x ") and "amd/rocm" in line for line in lines)
    # every row's usable column ends at the same place
    usable_end = lines[0].index("usable GiB") + len("usable GiB")
    assert all(line[usable_end - 1] != " " for line in lines[1:])


def test_instance_table_has_known_rows():
    lines = gpu_table(instances=True).splitlines()
    assert len(lines) == len(load_instances()) + 1
    p4d = next(line for line in lines if line.startswith("p4d.24xlarge "))
    assert "aws" in p4d and "8 x a100-40gb" in p4d and p4d.endswith("320.0")
    nv6 = next(line for line in lines if line.startswith("Standard_NV6ads_A10_v5 "))
    assert "4.0 GiB slice of a10" in nv6 and nv6.endswith("4.0")


def test_smallest_fitting_orders_by_usable_memory():
    fitting = smallest_fitting(70 * GIB)
    assert fitting
    assert all(gpu.usable_bytes >= 70 * GIB for gpu in fitting)
    usable = [gpu.usable_bytes for gpu in fitting]
    assert usable == sorted(usable)
    ids = [gpu.id for gpu in fitting]
    assert "h100-sxm" in ids and "a100-40gb" not in ids
    assert ids.index("a100-80gb") < ids.index("h200") < ids.index("b200")


def test_smallest_fitting_by_vendor():
    amd = smallest_fitting(70 * GIB, vendor="AMD")
    assert [gpu.id for gpu in amd][:2] == ["mi300x", "mi308x"]  # equal memory: ordered by id
    assert {gpu.vendor for gpu in amd} == {"amd"}
    assert smallest_fitting(10_000 * GIB) == []
