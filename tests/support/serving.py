"""A capacity deployment prepared as the simulator's tests use it: Llama-3.1-8B with a
Llama-3.2-1B draft on an H100 under vLLM, α 0.7, K 3, 512-token prompts and 128-token answers."""

from __future__ import annotations

from infersize.core.engines import EngineSettings
from infersize.service.capacity.request import CapacityRequest, Traffic, prepare_capacity
from infersize.service.request import SpecRequest
from infersize.service.resolve import DeploymentRequest

INPUT, OUTPUT = 512, 128


def prepared_for(catalog, target="llama-3.1-8b", draft="llama-3.2-1b", gpu="h100", **spec):
    request = CapacityRequest(
        spec=SpecRequest(
            deployment=DeploymentRequest(target=target, draft=draft, gpu=gpu),
            engine=EngineSettings(engine="vllm"),
            acceptance_rate=0.7,
            draft_k=3,
            **spec,
        ),
        traffic=Traffic(input_tokens=(INPUT,), output_tokens=(OUTPUT,), request_rate=1.0),
    )
    return prepare_capacity(request, catalog)
