"""verl's external library (`actor_rollout_ref.model.external_lib: vrag_rl.training.verl_plugins.register`).

Importing it registers, in the importing process, the advantage estimator `ggpo` (`advantage`, with verl's
`register_adv_est`) and the verl agent loop of every installed agent plugin (`AgentPlugin.register_verl`:
`vrag_agent`, `vimrag_agent`). The plugins are found by name, so no agent's loop is named here.
"""
from vrag_rl.agent.plugins import agent_plugins
from vrag_rl.training.verl_plugins import advantage  # noqa: F401  (registers the `ggpo` estimator)
from vrag_rl.training.verl_plugins.verl_fixes import apply_verl_fixes

for _plugin in agent_plugins().values():
    _plugin.register_verl()

apply_verl_fixes()  # verl 0.9.1 faults a real run hits on any device (verl_fixes.py)
