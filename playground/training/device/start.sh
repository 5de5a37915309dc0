#!/bin/bash
# On the device machine (README, "Training on a GPU"), in the repository copy: install the carried
# wheels, join the GGUF, start the recipe detached (it outlives this call), then wait for it.
# Usage: bash playground/training/device/start.sh [seconds to wait, default 540]
set -x
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv
mkdir -p /tmp/parts /tmp/site /tmp/export
cp .gpu_carry/parts/* /tmp/parts/
ls -la /tmp/parts
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .gpu_carry/whl/*.whl || exit 3
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
python3 -m playground.training.gguf_parts join /tmp/parts /tmp/site || exit 4
rm -rf /tmp/repo && mkdir /tmp/repo && cp -r playground /tmp/repo/ && cd /tmp/repo || exit 5
python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__, torch.cuda.is_available())"
setsid nohup bash -c 'python3 -m playground.training.recipe --profile gpu --phase gen,train,tune --work /tmp/mtp_work --out /tmp/mtp_out --export /tmp/export > /tmp/log.txt 2>&1; echo $? > /tmp/done' > /dev/null 2>&1 < /dev/null &
sleep 2
exec bash "$OLDPWD/playground/training/device/wait.sh" "${1:-540}"
