"""The offline demo's workflow as a script (the same definition and scripted model).

tooldeck workflows run tests/workflow_scripts/trip_brief.py --inputs '{"city": "Lisbon", "days": 2}'
"""

from tooldeck.workflows.demo import demo_workflow as workflow
from tooldeck.workflows.demo import scripted_model

__all__ = ["scripted_model", "workflow"]
