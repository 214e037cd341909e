"""The CronJob controller (``cronjob-controller``): Jobs on a cron schedule."""

from controller_manager.controllers.cronjob.controller import CronJobController

__all__ = ["CronJobController"]
