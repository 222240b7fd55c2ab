# Training steps of torchvision's ResNet-18 (10 classes, 32x32 inputs, batch 8, 1 step unless
# told) on the CPU: the unmodified Python program that `tracerun` traces for `tracedot model` and
# for the memory categories of scripts/demo.sh's picture. Nothing of tracerun here.
#   tracerun -o resnet18.db -- /usr/bin/python3 samples/python/resnet18_step.py [BATCH] [STEPS]
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
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
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
