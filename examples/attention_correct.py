import torch
def attention(q, k, v, allowed):
    s = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    s = s.masked_fill(~allowed, float("-inf"))
    w = torch.softmax(s, -1)
    return w @ v, w
