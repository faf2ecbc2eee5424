"""The model's own options, those that change the math (not the optimisation):
``ModelConfig``, which the forward and backward passes, training and inference read.
(A run's options, ``TrainConfig``, are in training/options/config.py; ``TrainConfig.model_config``
makes this one.)"""

from dataclasses import dataclass


@dataclass
class ModelConfig:
    """Architecture options that change the math (not the optimisation).

    routing_iters  m, Algorithm 1 (>= 1)
    routing_rule   'paper' (b_i = u_hat_i . e) or 'sabour' (b_i += u_hat_i . e)
    routing_scale  c = scale * softmax(b); None -> q - 1 (authors' code), 1.0 = paper
    grad_mode      'exact' (true gradient) or 'stop' (c treated as constant, authors' code)
    skipgram_weight     lambda of the skip-gram term (skipgram.py); 0 = the paper's loss
                        (the term's code does not run)
    skipgram_negatives  0: the term's softmax is the capsule loss's sampled softmax over
                        V'; K > 0: word2vec's negative sampling, K negatives per item
    """

    routing_iters: int = 1
    routing_rule: str = "paper"
    routing_scale: float | None = None
    grad_mode: str = "exact"
    skipgram_weight: float = 0.0
    skipgram_negatives: int = 0

    def scale_for(self, n_slots):
        return float(n_slots) if self.routing_scale is None else float(self.routing_scale)
