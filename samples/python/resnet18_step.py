# Training steps of torchvision's ResNet-18 (10 classes, 32x32 inputs, batch 8, 1 step, SGD with
# momentum unless told) on the CPU: the unmodified Python program that `tracerun` traces for
# `tracedot model` and for the memory categories of scripts/demo.sh's picture. Nothing of tracerun
# here. OPTIMIZER: sgdm (SGD, momentum 0.9), adamw (AdamW) or sgd (plain SGD).
#   tracerun -o resnet18.db -- /usr/bin/python3 samples/python/resnet18_step.py [BATCH] [STEPS]
#                                                                               [OPTIMIZER]
#   tracedot model resnet18.db -o resnet18.svg
import sys

import torch
import torchvision


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    batch = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    model = torchvision.models.resnet18(num_classes=10)
    kind = sys.argv[3] if len(sys.argv) > 3 else "sgdm"
    if kind == "adamw":
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    elif kind in ("sgdm", "sgd"):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01,
                                    momentum=0.9 if kind == "sgdm" else 0.0)
    else:
        sys.stderr.write("resnet18_step.py: unknown optimizer %r (sgdm, adamw or sgd)\n" % kind)
        sys.exit(2)
    loss_fn = torch.nn.CrossEntropyLoss()
    images = torch.randn(batch, 3, 32, 32)
    labels = torch.randint(0, 10, (batch,))

    for _ in range(steps):
        optimizer.zero_grad()
        loss = loss_fn(model(images), labels)
        loss.backward()
        optimizer.step()
    params = sum(p.numel() for p in model.parameters())
    print("resnet18: %d parameters, loss %.4f" % (params, loss.item()))


if __name__ == "__main__":
    main()
