"""What the tasks part answers about its tasks: one task, its details and files, a user's
tasks, a prescreen."""

from __future__ import annotations

from typing import Any

from ...errors import TaskNotFound, field_detail
from ..accounts.linked_accounts import USER_LINK_PRODUCTS
from ..companies.companies import OPERATIONAL, Company, search_record
from ..companies.search import SearchRequest, normalize, search_companies
from ..shapes import UNSET
from .records import DEPOSIT, DEPOSIT_FORM, UNKNOWN_FILE, UNKNOWN_TASK, FileNotFound, Task, TaskFile
from .states import COMPLETED
from .views import Prescreen, TaskDetails

HIGH, LOW = "HIGH", "LOW"


class TaskReads:
    """The tasks part's reads (Tasks inherits them): they read its tasks and change nothing."""

    def get_task(self, task_id: str, identifier: str | None = None) -> Task:
        """A task; with `identifier` (a public token's user) only that user's tasks exist."""
        task = self._by_id.get(task_id)
        if task is None or identifier is not None and task.identifier != identifier:
            raise TaskNotFound(UNKNOWN_TASK.format(task_id=task_id))
        return task

    def _data_account(self, task: Task) -> Any:
        """The linked account whose data a completed task left or refreshed, if any (a
        sign-in's: the user's first at the company, as the engine finds it)."""
        if task.status != COMPLETED:
            return None
        if task.linked_account is not None:
            account = self.accounts.get(task.linked_account)
        elif task.product in USER_LINK_PRODUCTS:
            account = self.accounts.find(task.identifier, task.company_id)
        else:
            return None
        return None if account is None or account.pii_deleted else account

    def payroll_data_available(self, task: Task) -> bool:
        """The real Task's `payrollDataAvailable`: the task completed and left payroll data
        to read (a completed deposit or verify task, or a refresh of a linked account, whose
        account still holds its data: not deleted as PII)."""
        return self._data_account(task) is not None

    def files(self, task: Task) -> list[TaskFile]:
        """A task's files: the direct deposit authorization form of a deposit task, and the
        paystubs of the payroll data it left."""
        files = []
        if task.product == DEPOSIT:
            files.append(TaskFile(DEPOSIT_FORM, f"direct-deposit-{task.company_id}.pdf"))
        account = self._data_account(task)
        if account is not None:
            files += [TaskFile(s["_id"], f"paystub-{s['date'][:10]}.pdf", statement=s,
                               account=account) for s in account.statements]
        return files

    def file_of(self, task: Task, file_id: str) -> TaskFile:
        for file in self.files(task):
            if file.id == file_id:
                return file
        raise FileNotFound(UNKNOWN_FILE.format(task_id=task.id, file_id=file_id),
                           details=[field_detail("$.fileId", "unknown", location="path")])

    def details_of(self, task: Task) -> TaskDetails:
        """GET /task/{taskId}/details: the task with its company (a Company; one deleted
        since: its `_id`), whether it left payroll data, and its files."""
        company = self.companies.get(task.company_id)
        return TaskDetails.of(
            task, company=(search_record(company, self.settings.manual_deposits)
                           if company is not None else {"_id": task.company_id}),
            payroll_data_available=self.payroll_data_available(task), files=self.files(task))

    def of_user(self, identifier: str, *, status: str | None = None,
                payroll_data: bool | None = None) -> list[TaskDetails]:
        """GET /user/{identifier}/tasks: the user's tasks as Task records, oldest first."""
        self.identity.require(identifier)
        return [self.details_of(task) for task in self.values()
                if task.identifier == identifier and (status is None or task.status == status)
                and (payroll_data is None or self.payroll_data_available(task) == payroll_data)]

    def prescreen(self, named: Any, product: str) -> Prescreen:
        """POST /task/prescreen: HIGH when a task for `product` at the company would start
        and run headless (username and password): the company is known, operational,
        offers the product and has headless authentication, and the account's
        manual-deposit rule does not cover it; LOW otherwise (an unknown company too)."""
        company = self._prescreened_company(named)
        high = (company is not None and company.status == OPERATIONAL
                and product in company.available_products
                and bool(company.capabilities.get("headlessAuthentication"))
                and not self.settings.manual_deposits.applies_to(company))
        return Prescreen(confidence=HIGH if high else LOW,
                         company_id=company.id if company is not None else None)

    def _prescreened_company(self, named: Any) -> Company | None:
        """The company by `id`, else the one whose name is `name` (case, spaces and
        punctuation aside, as the search's exact tier compares them): a PrescreenCompany."""
        company = self.companies.get(named.id) if named.id is not UNSET else None
        if company is None and named.name is not UNSET:
            wanted = normalize(named.name)
            found = search_companies(self.companies, self.settings.manual_deposits,
                                     SearchRequest(query=named.name, limit=5))
            company = next((c for c in found if normalize(c.name) == wanted), None)
        return company
